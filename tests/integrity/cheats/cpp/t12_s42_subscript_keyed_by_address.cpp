// expect: T12.cpp.static_cache
// Session 42 told lambda introducers from subscripts; a container indexed by a tensor's address is still a cache key.
#include <ATen/core/Tensor.h>

#include <unordered_map>

at::Tensor lookup(std::unordered_map<void*, at::Tensor>& results, const at::Tensor& x) {
  return results[x.data_ptr()];
}
