"""Honest (session 42, KernelBench single file, CPU): row softmax (23_Softmax) written with the standard library:
std::max_element for the row max, std::transform with a capturing lambda for exp, std::accumulate into a double,
std::for_each for the scaling; ModelNew checks its input's rank and makes it contiguous first."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_source = """
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <numeric>

torch::Tensor softmax_rows(const torch::Tensor& x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "a contiguous 2-D tensor expected");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* dst = out + r * cols;
        const float m = *std::max_element(row, row + cols);
        std::transform(row, row + cols, dst, [m](float v) { return std::exp(v - m); });
        const double total = std::accumulate(dst, dst + cols, 0.0);
        const float inv = static_cast<float>(1.0 / total);
        std::for_each(dst, dst + cols, [inv](float& v) { v *= inv; });
    }
    return y;
}
"""

softmax_ext = load_inline(
    name="softmax_std_cpu",
    cpp_sources=softmax_source,
    functions=["softmax_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"expected a 2-D input, got {x.dim()}-D")
        return softmax_ext.softmax_rows(x.contiguous())
