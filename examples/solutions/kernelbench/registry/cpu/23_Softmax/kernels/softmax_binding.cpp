// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols);

at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  auto out = at::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  softmax_cpu(x_p, out_p, x.size(0), x.size(1));
  return out;
}

REGISTER_BINDING(softmax_forward, softmax_forward);
