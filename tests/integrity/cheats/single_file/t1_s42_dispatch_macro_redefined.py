# expect: T1.cpp.vendor_library
# Session 42 stopped counting AT_DISPATCH_*(t, "name", ...)'s name as a BLAS use; a macro of that shape defined by the
# candidate could put the literal anywhere (here an asm label), so where the sources define one, every literal counts.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

#define AT_DISPATCH_LABEL(type, name) __asm__(name)

extern "C" void vendor_gemm(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                            const int*, const float*, const int*, const float*, float*, const int*)
    AT_DISPATCH_LABEL(float, "sgemm_");

torch::Tensor mm_forward(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    const int m = b.size(1), n = a.size(0), k = a.size(1);
    const float one = 1.f, zero = 0.f;
    vendor_gemm("N", "N", &m, &n, &k, &one, b.data_ptr<float>(), &m, a.data_ptr<float>(), &k, &zero,
                c.data_ptr<float>(), &m);
    return c;
}
"""

ext = load_inline(name="mm_ext", cpp_sources=source, functions=["mm_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.mm_forward(a, b)
