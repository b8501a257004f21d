// expect: T12.cpp.static_cache
#include "../binding_registry.h"
#include <unordered_map>
std::unordered_map<long, at::Tensor> g_results;
at::Tensor cached(const at::Tensor& a) { return g_results.at(a.numel()); }
