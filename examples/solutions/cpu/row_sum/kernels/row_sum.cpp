// Row sums on the CPU: rows in parallel, each summed with a SIMD reduction.
#include <cstdint>

void row_sum_cpu(const float* x, float* out, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < cols; ++c) acc += row[c];
    out[r] = acc;
  }
}
