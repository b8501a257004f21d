// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

void relu_cpu(const float* x, float* y, int64_t n);

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  auto out = at::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  relu_cpu(x_p, out_p, x.numel());
  return out;
}

REGISTER_BINDING(relu_forward, relu_forward);
