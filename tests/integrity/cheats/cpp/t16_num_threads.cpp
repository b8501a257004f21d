// expect: T16.cpp.thread_count
// More OpenMP threads than the sandbox's budget (the baselines run with OMP_NUM_THREADS).
#include <cstdint>
void relu(const float* x, float* y, int64_t n) {
#pragma omp parallel for num_threads(8)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
