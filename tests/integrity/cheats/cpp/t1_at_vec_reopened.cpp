// expect: T1.cpp.namespace_import
// at::vec is header-only SIMD and allowed; a function added to it that calls an ATen op is not.
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>

namespace at {
namespace vec {
inline at::Tensor fused_softmax(const at::Tensor& x) { return x.softmax(1); }
}  // namespace vec
}  // namespace at

at::Tensor softmax_forward(const at::Tensor& x) {
  at::vec::Vectorized<float> unused(0.0f);
  (void)unused;
  return at::vec::fused_softmax(x);
}
