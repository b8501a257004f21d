// expect: T12.cpp.static_cache
#include "../binding_registry.h"
at::Tensor run(const at::Tensor& a, const at::Tensor& out) {
  static const void* last = nullptr;
  if (a.data_ptr() == last) return out;
  last = a.data_ptr();
  return out;
}
