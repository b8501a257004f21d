// Honest: at::vec::Vectorized SIMD arithmetic and at::vec functional helpers (session 38): no ATen op behind them.
#include <ATen/cpu/vec/vec.h>
#include <ATen/cpu/vec/functional.h>
#include <cstdint>

using Vec = at::vec::Vectorized<float>;

void relu_scale_cpu(const float* x, float* y, int64_t n, float scale) {
  const Vec zero(0.0f);
  const Vec s(scale);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec v = Vec::loadu(x + i);
    v = at::vec::maximum(v, zero) * s;
    v.store(y + i);
  }
  for (; i < n; ++i) y[i] = (x[i] > 0.f ? x[i] : 0.f) * scale;
}

float sum_cpu(const float* x, int64_t n) {
  return at::vec::reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, x, n);
}
