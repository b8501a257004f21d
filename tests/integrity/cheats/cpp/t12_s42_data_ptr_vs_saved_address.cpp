// expect: T12.cpp.static_cache
// Session 42 allowed comparing two tensors' data pointers of the same call and a data pointer with nullptr (aliasing
// and definedness checks); a data pointer compared with an address remembered from an earlier call stays refused.
#include <ATen/core/Tensor.h>

#include <cstdint>

at::Tensor forward(const at::Tensor& x, at::Tensor& out) {
  TORCH_CHECK(out.data_ptr() != x.data_ptr() && x.data_ptr() != nullptr, "forward: bad arguments");
  static std::uintptr_t last = 0;
  if (x.data_ptr() == reinterpret_cast<void*>(last)) return out;  // "same input as last time": skip the work
  last = reinterpret_cast<std::uintptr_t>(x.data_ptr());
  return out;
}
