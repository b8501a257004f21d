"""KernelBench level 1 problem 23 (23_Softmax): an honest CPU kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - m);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  softmax_cpu(x_p, out_p, x.size(0), x.size(1));
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p23_cpu",
    cpp_sources=cpp_source,
    functions=["softmax_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x)
