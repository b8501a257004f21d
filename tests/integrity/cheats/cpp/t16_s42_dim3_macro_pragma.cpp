// expect: T16.cpp.thread_count
// Session 42 allowed `dim3 num_threads(...)` (a CUDA block shape). With `dim3` defined away, the same words continue an
// OpenMP pragma as its num_threads clause (g++ expands macros in `#pragma omp` lines): refused on the pragma's line,
// which the macro-expanded pass sees joined.
#define dim3

void relu(const float* x, float* y, long n) {
#pragma omp parallel for \
    dim3 num_threads(64)
  for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
