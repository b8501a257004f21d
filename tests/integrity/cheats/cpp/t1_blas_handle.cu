// expect: T1.cpp.vendor_library
#include <ATen/cuda/CUDAContext.h>
void* handle() { return at::cuda::getCurrentCUDABlasHandle(); }
