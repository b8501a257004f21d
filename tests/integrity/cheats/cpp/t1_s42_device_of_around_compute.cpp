// expect: T1.cpp.aten_call
// Session 42 allowed at::device_of, at::maybe_wrap_dim and ATen's TensorUtils checks (at::checkSize ...); what they are
// given is still judged: an ATen operator in their arguments stays refused.
#include <ATen/DeviceGuard.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>

at::Tensor forward(const at::Tensor& a, const at::Tensor& b, int64_t dim) {
  at::OptionalDeviceGuard guard(at::device_of(a));
  at::TensorArg a_arg{a, "a", 1};
  at::checkSize("forward", a_arg, {a.size(0), b.size(0)});
  dim = at::maybe_wrap_dim(dim, a.dim());
  return at::_ops::mm::call(a, b);
}
