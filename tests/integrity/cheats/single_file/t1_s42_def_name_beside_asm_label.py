# expect: T1.cpp.vendor_library
# Session 42 stopped counting a literal given to m.def(...) or AT_DISPATCH_*(...) as a BLAS use (`m.def("sgemm", ...)`
# names the candidate's own function); a BLAS routine bound by an asm label in the same sources stays refused.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

extern "C" float vendor_dot(const int* n, const float* x, const int* incx, const float* y, const int* incy)
    __asm__("sdot_");

torch::Tensor dot_forward(torch::Tensor a, torch::Tensor b) {
    const int n = a.numel(), one = 1;
    auto out = torch::empty({}, a.options());
    *out.data_ptr<float>() = vendor_dot(&n, a.data_ptr<float>(), &one, b.data_ptr<float>(), &one);
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("sdot", &dot_forward);
}
"""

ext = load_inline(name="dot_ext", cpp_sources=source, verbose=False)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.sdot(a, b)
