// Swish on the CPU: one OpenMP-parallel, vectorisable pass.
#include <cmath>
#include <cstdint>

void swish_cpu(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + std::exp(-v));
  }
}
