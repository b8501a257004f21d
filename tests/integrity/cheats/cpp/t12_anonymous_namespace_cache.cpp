// expect: T12.cpp.static_cache
#include <cstdint>
namespace { float cached[16384]; double cached_key; }
void swish_cached(const float* x, float* y, int64_t n) {
  if (x[0] == cached_key) { for (int64_t i = 0; i < n; ++i) y[i] = cached[i]; return; }
  for (int64_t i = 0; i < n; ++i) { y[i] = x[i] / (1.0f + __builtin_expf(-x[i])); cached[i] = y[i]; }
  cached_key = x[0];
}
