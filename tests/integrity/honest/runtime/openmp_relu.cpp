// Honest OpenMP kernel: its worker pool must not count as a background thread.
#include <algorithm>
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}
