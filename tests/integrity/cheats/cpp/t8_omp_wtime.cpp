// expect: T8.cpp.clock
// Session 39's red team: OpenMP's wall clock, in a file that includes omp.h for its pragmas anyway.
#include <omp.h>
double now_s() { return omp_get_wtime(); }
