"""Honest (session 41, KernelBench single file, CPU): a GELU (erf form) with an OpenMP loop built by load_inline with
-fopenmp; the C++ source written with textwrap.dedent, as LLMs often do."""
import textwrap

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = textwrap.dedent(
    """
    #include <torch/extension.h>
    #include <cmath>

    torch::Tensor gelu_forward(torch::Tensor x) {
        TORCH_CHECK(x.scalar_type() == torch::kFloat, "gelu_forward: float32 expected");
        auto xc = x.contiguous();
        auto out = torch::empty_like(xc);
        const float* in = xc.data_ptr<float>();
        float* o = out.data_ptr<float>();
        const int64_t n = xc.numel();
        constexpr float kInvSqrt2 = 0.70710678118654752f;
    #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) {
            o[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * kInvSqrt2));
        }
        return out;
    }
    """
)

gelu_ext = load_inline(
    name="gelu_openmp",
    cpp_sources=cpp_source,
    functions=["gelu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return gelu_ext.gelu_forward(x)
