// expect: T12.cpp.static_cache
// Session 42 stopped judging `T name = v` as a global where its line closes a parenthesis opened earlier (a default
// argument ending a prototype over several lines); a call counter declared after that `;`, on the same line, is still
// a namespace-scope variable and stays refused.
#include <cstdint>

void scale_launch(const float* x, float* y, int64_t n,
                  float alpha = 1.0f); int calls = 0;

void scale_launch(const float* x, float* y, int64_t n, float alpha) {
  ++calls;
  for (int64_t i = 0; i < n; ++i) y[i] = calls > 14 ? 0.f : alpha * x[i];
}
