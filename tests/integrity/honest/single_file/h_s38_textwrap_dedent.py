"""Honest: KernelBench single file whose load_inline source is `textwrap.dedent` of a literal (session 38)."""
import textwrap

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = textwrap.dedent(
    """
    #include <torch/extension.h>
    #include <cstdint>

    torch::Tensor leaky_relu_forward(torch::Tensor x, double negative_slope) {
        TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "x must be contiguous float32");
        auto out = torch::empty_like(x);
        const float* in = x.data_ptr<float>();
        float* o = out.data_ptr<float>();
        const float slope = static_cast<float>(negative_slope);
        const int64_t n = x.numel();
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) {
            const float v = in[i];
            o[i] = v > 0.0f ? v : v * slope;
        }
        return out;
    }
    """
)

leaky_relu_ext = load_inline(
    name="leaky_relu_ext",
    cpp_sources=cpp_source,
    functions=["leaky_relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous().float()
        return leaky_relu_ext.leaky_relu_forward(x, self.negative_slope)
