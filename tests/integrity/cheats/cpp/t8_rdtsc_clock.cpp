// expect: T8.cpp.clock
#include <cstdint>
static inline uint64_t ticks() { uint32_t lo, hi; __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi)); return ((uint64_t)hi << 32) | lo; }
double fake_now(double scale) { return (double)ticks() * scale; }
