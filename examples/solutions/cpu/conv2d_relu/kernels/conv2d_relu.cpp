// Direct 2-D convolution (stride 1, zero padding) + bias + ReLU on the CPU, NCHW.
#include <algorithm>
#include <cstdint>

void conv2d_relu_cpu(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, int64_t h,
                     int64_t wd, int64_t oc, int64_t kh, int64_t kw, int64_t pad) {
  const int64_t oh = h + 2 * pad - kh + 1, ow = wd + 2 * pad - kw + 1;
#pragma omp parallel for collapse(2) schedule(static) if (n * oc * h * wd * c >= (1 << 18))
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          float acc = bias[o];
          for (int64_t ci = 0; ci < c; ++ci) {
            for (int64_t u = 0; u < kh; ++u) {
              const int64_t yi = i + u - pad;
              if (yi < 0 || yi >= h) continue;
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t xj = j + v - pad;
                if (xj < 0 || xj >= wd) continue;
                acc += x[((b * c + ci) * h + yi) * wd + xj] * w[((o * c + ci) * kh + u) * kw + v];
              }
            }
          }
          y[((b * oc + o) * oh + i) * ow + j] = std::max(acc, 0.0f);
        }
      }
    }
  }
}
