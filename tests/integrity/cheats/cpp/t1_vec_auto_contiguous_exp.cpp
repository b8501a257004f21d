// expect: T1.cpp.aten_method
// `t` is a Vectorized in one function and `auto` from a tensor's .contiguous() in the next: the second `t.exp()`
// is at::exp (a name is trusted only when every declaration of it is a Vectorized one).
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>

using Vec = at::vec::Vectorized<float>;

void exp_simd(const float* x, float* y) {
  auto t = Vec::loadu(x);
  t.exp().store(y);
}

at::Tensor exp_forward(const at::Tensor& x) {
  auto t = x.contiguous();
  return t.exp();
}
