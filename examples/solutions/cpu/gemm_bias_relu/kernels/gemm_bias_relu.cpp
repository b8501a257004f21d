// relu(A @ W^T + b) on the CPU. W is [N, K] (nn.Linear layout), so each output
// is a dot product of two contiguous rows: rows of A in parallel, SIMD dots.
#include <algorithm>
#include <cstdint>

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
#pragma omp parallel for schedule(static) if (m * n * k >= (1 << 18))
  for (int64_t i = 0; i < m; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t p = 0; p < k; ++p) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}
