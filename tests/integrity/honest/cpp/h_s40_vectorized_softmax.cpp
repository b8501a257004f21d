// Honest (session 40): 23_Softmax on the CPU with at::vec::Vectorized methods: `.exp()` and `.log()` of
// Vectorized values are header-only SIMD, not the tensor methods T1.cpp.aten_method refuses. Graded correct end to
// end on the CPU backend by tests/kernelbench/test_vectorized_and_static_cache_e2e.py (it is that test's kernel).
#include <ATen/cpu/vec/vec.h>

#include <cmath>
#include <cstdint>

using Vec = at::vec::Vectorized<float>;

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
    const Vec vm(m);
    int64_t c = 0;
    for (; c + Vec::size() <= cols; c += Vec::size()) (Vec::loadu(in + c) - vm).exp().store(out + c);
    for (; c < cols; ++c) out[c] = std::exp(in[c] - m);
    double sum = 0.0;
    for (c = 0; c < cols; ++c) sum += out[c];
    // y = exp(x - (m + log(sum))): the log-sum-exp form, its log taken on a Vectorized as well
    const Vec shift = Vec(static_cast<float>(sum)).log() + vm;
    float lse[Vec::size()];
    shift.store(lse);
    for (c = 0; c + Vec::size() <= cols; c += Vec::size()) {
      auto v = Vec::loadu(in + c);
      (v - shift).exp().store(out + c);
    }
    for (; c < cols; ++c) out[c] = std::exp(in[c] - lse[0]);
  }
}
