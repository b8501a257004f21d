// Slim registry binding: allocation, checks, raw pointers. Mentions of at::matmul or
// cudaStreamCreate in comments and strings are not calls.
#include "../binding_registry.h"

#include <cstdint>

void relu_cpu(const float* x, float* y, int64_t n);

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous (not at::matmul, not cudaStreamCreate)");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: float32 expected, got ", x.scalar_type());
  at::Tensor y = at::empty_like(x);
  relu_cpu(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
  return y;
}

REGISTER_BINDING(relu_forward, relu_forward);
