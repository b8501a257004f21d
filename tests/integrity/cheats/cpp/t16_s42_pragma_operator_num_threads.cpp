// expect: T16.cpp.thread_count
// The num_threads clause in a _Pragma operator's string (found while narrowing T16 in session 42: it passed before).
void relu(const float* x, float* y, long n) {
  _Pragma("omp parallel for num_threads(64)")
  for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
