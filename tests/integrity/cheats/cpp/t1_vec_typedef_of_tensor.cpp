// expect: T1.cpp.aten_method
// A typedef dressed as a vector type: fVec is at::Tensor, so `.log()` is at::log.
#include <ATen/core/Tensor.h>

typedef at::Tensor fVec;

at::Tensor log_forward(const at::Tensor& x) {
  fVec v = x.contiguous();
  return v.log();
}
