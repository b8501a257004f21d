// expect: T1.cpp.aten_call
#include "../binding_registry.h"
#define JOIN(x, y) x##y
#define NS JOIN(a, t)
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  return NS::JOIN(mat, mul)(a, b);
}
