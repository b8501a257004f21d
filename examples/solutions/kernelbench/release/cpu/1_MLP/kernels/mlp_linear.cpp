#include <cstdint>

void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                    int64_t out, float scale, float slope) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const float* xr = x + r * in;
      const float* wo = w + o * in;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * wo[i];
      float v = (static_cast<float>(acc) + bias[o]) * scale;
      y[r * out + o] = v > 0.0f ? v : slope * v;
    }
  }
}
