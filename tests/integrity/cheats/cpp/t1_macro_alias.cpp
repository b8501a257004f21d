// expect: T1.cpp.aten_call
#include "../binding_registry.h"
#define FAST_GEMM at::matmul
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  return FAST_GEMM(a, b);
}
