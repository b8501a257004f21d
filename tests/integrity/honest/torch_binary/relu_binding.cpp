// Honest slim binding against the real registry header: allocation, checks, data pointers, OpenMP.
#include "binding_registry.h"

#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <cstdint>

static void relu_cpu(const float* x, float* y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous(), "relu_forward: contiguous input expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: float32 expected, got ", x.scalar_type());
  at::Tensor y = at::empty_like(x);
  relu_cpu(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
  return y.view(x.sizes());
}

REGISTER_BINDING(relu_forward, relu_forward);
