"""Honest (session 42, KernelBench single file, CPU): level-2 12_Gemm_Multiply_LeakyReLU fused in C++ built by
load_inline (`functions=[...]`), rows split with at::parallel_for, a host lambda for the dot product accumulating in
double; ModelNew keeps the reference's nn.Linear (same initialisation) and passes its weight and bias."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor gemm_mul_leaky_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double multiplier,
                                  double negative_slope) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "shapes do not match");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 expected");
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t batch = x.size(0), in_f = x.size(1), out_f = weight.size(0);
    auto out = torch::empty({batch, out_f}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const float mult = static_cast<float>(multiplier);
    const float slope = static_cast<float>(negative_slope);
    auto dot = [in_f](const float* a, const float* b) -> double {
        double acc = 0.0;
        for (int64_t k = 0; k < in_f; ++k) acc += static_cast<double>(a[k]) * b[k];
        return acc;
    };
    at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            for (int64_t o = 0; o < out_f; ++o) {
                const float v = static_cast<float>(dot(xp + r * in_f, wp + o * in_f) + bp[o]) * mult;
                op[r * out_f + o] = v > 0.f ? v : v * slope;
            }
        }
    });
    return out;
}
"""

fused = load_inline(
    name="gemm_mul_leaky_relu_cpu",
    cpp_sources=[cpp_source],
    functions=["gemm_mul_leaky_relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return fused.gemm_mul_leaky_relu(x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)
