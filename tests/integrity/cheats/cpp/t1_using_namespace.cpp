// expect: T1.cpp.namespace_import
#include "../binding_registry.h"
using namespace at;
Tensor gemm(const Tensor& a, const Tensor& b) {
  return matmul(a, b);
}
