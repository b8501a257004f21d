// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_contiguous() && a.scalar_type() == at::kFloat, "matmul_forward: a must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "matmul_forward: b must be a contiguous float32 tensor");
  auto out = at::empty({a.size(0), b.size(1)}, a.options());
  const float* a_p = a.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  matmul_cpu(a_p, b_p, out_p, a.size(0), a.size(1), b.size(1));
  return out;
}

REGISTER_BINDING(matmul_forward, matmul_forward);
