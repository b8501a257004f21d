// expect: T1.cpp.aten_method
// `Vec` is an alias of at::Tensor, not of at::vec::Vectorized: `v.exp()` dispatches the ATen op.
#include <ATen/core/Tensor.h>

using Vec = at::Tensor;

at::Tensor exp_forward(const at::Tensor& x) {
  Vec v = x;
  return v.exp();
}
