// Honest (session 41, registry convention, CPU): ReLU and a scaled copy with at::vec::map and
// at::vec::Vectorized<float>::size(), a scalar tail loop.
#include "../binding_registry.h"
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty_like.h>

using Vec = at::vec::Vectorized<float>;

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: contiguous float32 expected");
  auto y = at::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
  const int64_t n = x.numel();
  at::vec::map([](Vec v) { return at::vec::maximum(v, Vec(0.0f)); }, out, in, n);
  return y;
}

at::Tensor scale_forward(const at::Tensor& x, double alpha) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "scale_forward: contiguous float32 expected");
  auto y = at::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
  const int64_t n = x.numel();
  const Vec a(static_cast<float>(alpha));
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    (Vec::loadu(in + i) * a).store(out + i);
  }
  for (; i < n; ++i) out[i] = static_cast<float>(alpha) * in[i];
  return y;
}

REGISTER_BINDING(relu_forward, relu_forward);
REGISTER_BINDING(scale_forward, scale_forward);
