// CPU kernel: OpenMP, templates, std::max, numeric limits.
#include <algorithm>
#include <cstdint>
#include <limits>

template <typename T>
static inline T relu_one(T v) {
  return std::max(v, T(0));
}

void relu_cpu(const float* x, float* y, int64_t n) {
  static constexpr int64_t kGrain = 4096;
  float lowest = std::numeric_limits<float>::max();
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = relu_one(x[i]);
  }
  (void)lowest;
}
