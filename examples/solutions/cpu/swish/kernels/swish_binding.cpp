// Registers cuda_extension.swish_forward(x, out).
#include "../binding_registry.h"

void swish_cpu(const float* x, float* y, int64_t n);

void swish_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "swish_forward: float32 tensors expected");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "swish_forward: contiguous tensors expected");
  TORCH_CHECK(x.numel() == out.numel(), "swish_forward: x and out differ in size");
  swish_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}

REGISTER_BINDING(swish_forward, swish_forward);
