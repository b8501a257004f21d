// expect: T1.cpp.aten_call
#include "../binding_registry.h"
at::Tensor soft(const at::Tensor& a) {
  return at::native::softmax(a, 1, false);
}
