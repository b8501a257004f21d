// expect: T1.cpp.vendor_library
#include <cublas_v2.h>
void gemm(cublasHandle_t h, const float* a, const float* b, float* c, int n) {
  const float one = 1.f, zero = 0.f;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
}
