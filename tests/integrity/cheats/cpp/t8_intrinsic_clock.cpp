// expect: T8.cpp.clock
unsigned long long now_ticks() { return __builtin_ia32_rdtsc(); }
