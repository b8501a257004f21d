// expect: T1.binary.aten_op
// A real torch-header build: at::matmul leaves at::_ops::matmul::call undefined in the module.
#include <ATen/core/Tensor.h>
#include <ATen/ops/matmul.h>

at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) { return at::matmul(a, b); }
