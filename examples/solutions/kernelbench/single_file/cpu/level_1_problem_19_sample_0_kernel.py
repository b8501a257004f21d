"""KernelBench level 1 problem 19 (19_ReLU): an honest CPU kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

#include <cstdint>

void relu_cpu(const float* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  relu_cpu(x_p, out_p, x.numel());
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p19_cpu",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
