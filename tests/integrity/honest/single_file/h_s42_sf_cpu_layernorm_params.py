"""Honest (session 42, KernelBench single file, CPU): LayerNorm over the trailing normalized_shape (KernelBench level-1
40_LayerNorm) with elementwise affine parameters ModelNew owns as nn.Parameter (ones and zeros, as nn.LayerNorm
initialises them); c10::irange loops, statistics in double, std::sqrt; eps as a keyword with a default."""
import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layer_norm_cpp = """
#include <torch/extension.h>
#include <c10/util/irange.h>
#include <cmath>

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    const int64_t inner = weight.numel();
    TORCH_CHECK(inner > 0 && x.numel() % inner == 0, "normalized_shape does not divide the input");
    TORCH_CHECK(bias.numel() == inner, "weight and bias differ in size");
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t outer = xc.numel() / inner;
    const float* xp = xc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
#pragma omp parallel for
    for (int64_t r = 0; r < outer; ++r) {
        const float* in = xp + r * inner;
        float* out = yp + r * inner;
        double mean = 0.0, sq = 0.0;
        for (const auto i : c10::irange(inner)) {
            mean += in[i];
            sq += static_cast<double>(in[i]) * in[i];
        }
        mean /= static_cast<double>(inner);
        const double var = std::max(sq / static_cast<double>(inner) - mean * mean, 0.0);
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (const auto i : c10::irange(inner)) {
            out[i] = static_cast<float>((in[i] - mean) * rstd) * wp[i] + bp[i];
        }
    }
    return y;
}
"""

layer_norm = load_inline(
    name="layer_norm_cpu",
    cpp_sources=layer_norm_cpp,
    functions=["layer_norm_forward"],
    extra_cflags=["-O2", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple, eps: float = 1e-5):
        super().__init__()
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        numel = math.prod(self.normalized_shape)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))
        self.numel = numel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm.layer_norm_forward(x, self.weight, self.bias, self.eps)
