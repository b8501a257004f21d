// expect: T8.cpp.clock
// Session 37's red team: timing a small allocation tells the (slower) audited call from the others.
#include <chrono>
double since() {
  auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
