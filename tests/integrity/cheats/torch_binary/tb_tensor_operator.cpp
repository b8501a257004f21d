// expect: T1.binary.aten_op
// Tensor arithmetic in C++ (`a * b + a`) has no call the source rules can name; the symbols show it.
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>

at::Tensor fused(const at::Tensor& a, const at::Tensor& b) { return a * b + a; }
