// Softmax over the last dimension on the CPU: one row per iteration, three passes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, in[c]);
    float s = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float e = std::exp(in[c] - m);
      out[c] = e;
      s += e;
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
