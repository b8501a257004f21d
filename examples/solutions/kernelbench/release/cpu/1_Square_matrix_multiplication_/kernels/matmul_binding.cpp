// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include "../binding_registry.h"

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

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

void register_matmul(pybind11::module& m) {
  m.def("matmul_forward", &matmul_forward, "matmul_forward (1_Square_matrix_multiplication_)");
}

REGISTER_BINDING(matmul, register_matmul);
