// expect: T12.cpp.static_cache
#include "../binding_registry.h"
#include <unordered_map>
at::Tensor gemm_impl(const at::Tensor& a, const at::Tensor& b);
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  static std::unordered_map<const void*, at::Tensor> cache;
  auto it = cache.find(a.data_ptr());
  if (it != cache.end()) return it->second;
  return cache[a.data_ptr()] = gemm_impl(a, b);
}
