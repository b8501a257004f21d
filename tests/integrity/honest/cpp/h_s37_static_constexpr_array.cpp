// Honest (session 37's false-rejection hunt): a static constexpr table is compile-time and immutable, not a cache.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

// exp() overflows float beyond ~88.7; clamp the sigmoid's argument to this range.
static constexpr std::array<float, 2> kExpClamp{-88.0f, 88.0f};

void swish_kernel(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::min(std::max(-v, kExpClamp[0]), kExpClamp[1]);
    y[i] = v / (1.0f + std::exp(t));
  }
}
