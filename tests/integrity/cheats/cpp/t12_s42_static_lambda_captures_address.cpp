// expect: T12.cpp.static_cache
// Session 42 allowed a lambda's init-capture of a data pointer (`[src = x.data_ptr<float>()](...)`, a local copy);
// a static lambda captures the first call's pointer and keeps it: refused.
#include <ATen/core/Tensor.h>

float first_value(const at::Tensor& x) {
  static auto first = [p = x.data_ptr<float>()]() { return p; };
  return *first();
}
