// expect: T1.cpp.aten_method
#include "../binding_registry.h"
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  return a.mm(b);
}
REGISTER_BINDING(gemm, gemm);
