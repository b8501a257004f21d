"""Honest (session 41, KernelBench single file, CPU): swish (x * sigmoid(x)) with at::vec::Vectorized<float>
(loadu, neg, exp, arithmetic, store) and at::parallel_for, a scalar tail; the module built in __init__ onto self."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SWISH_CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <cmath>

using fVec = at::vec::Vectorized<float>;

torch::Tensor swish_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
        int64_t i = begin;
        const fVec one(1.0f);
        for (; i + fVec::size() <= end; i += fVec::size()) {
            fVec v = fVec::loadu(in + i);
            fVec s = one / (one + v.neg().exp());
            (v * s).store(out + i);
        }
        for (; i < end; ++i) out[i] = in[i] / (1.0f + std::exp(-in[i]));
    });
    return y;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="swish_vec", cpp_sources=SWISH_CPP, functions=["swish_forward"],
                               extra_cflags=["-O3"], verbose=False)

    def forward(self, x):
        return self.ext.swish_forward(x)
