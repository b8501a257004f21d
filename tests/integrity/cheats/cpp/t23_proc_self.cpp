// expect: T23.cpp.system_call
#include <cstdio>
void peek() { FILE* f = fopen("/proc/self/maps", "r"); }
