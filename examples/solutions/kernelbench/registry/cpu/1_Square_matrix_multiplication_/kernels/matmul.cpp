#include <cstdint>
#include <cstring>

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::memset(row, 0, sizeof(float) * n);
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}
