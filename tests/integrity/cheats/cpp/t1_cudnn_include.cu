// expect: T1.cpp.vendor_library
#include <cudnn.h>
__global__ void k(float* x) { x[0] = 1.f; }
