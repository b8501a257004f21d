#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - m);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
