"""KernelBench level 1 problem 1 (1_Square_matrix_multiplication_): an honest CPU kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

#include <cstdint>
#include <cstring>

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::memset(row, 0, sizeof(float) * n);
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_contiguous() && a.scalar_type() == at::kFloat, "matmul_forward: a must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "matmul_forward: b must be a contiguous float32 tensor");
  auto out = torch::empty({a.size(0), b.size(1)}, a.options());
  const float* a_p = a.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  matmul_cpu(a_p, b_p, out_p, a.size(0), a.size(1), b.size(1));
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p1_cpu",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul_forward(A, B)
