// expect: T1.cpp.aten_method
// The same name as a Vectorized local and as a tensor parameter, and a Vectorized added to a tensor through an
// operator the file defines: both receivers are tensors.
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>

using Vec = at::vec::Vectorized<float>;

at::Tensor operator+(const Vec& a, const at::Tensor& b) { return b; }

void log_simd(const float* x, float* y) {
  Vec v = Vec::loadu(x);
  v.log().store(y);
}

at::Tensor log_forward(const at::Tensor& v, const float* p) {
  Vec w = Vec::loadu(p);
  return (w + v).log() + v.log();
}
