// expect: T1.cpp.aten_call
// Session 41 allowed the constant at::internal::GRAIN_SIZE (and at::parallel_reduce, at::get_thread_num,
// at::numeric_limits); any other at::internal name, and any call there, is still refused.
#include <ATen/Parallel.h>

void zero(float* p, int64_t n) {
  at::internal::invoke_parallel(0, n, at::internal::GRAIN_SIZE, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = 0.f;
  });
}
