// expect: T1.cpp.aten_call
#include "../binding_registry.h"
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  auto method = &at::Tensor::matmul;
  return (a.*method)(b);
}
