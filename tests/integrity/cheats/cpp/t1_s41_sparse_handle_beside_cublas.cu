// expect: T1.cpp.vendor_library
// Session 41: at::cuda::getCurrentCUDABlasHandle() passes where the skill allows cuBLAS; every vendor handle is still
// refused where its library is not allowed (this corpus is checked with no library allowed; the test module
// test_honest_corpus_s41.py also checks this file with cuBLAS allowed: the cuSPARSE handle stays refused).
#include <ATen/cuda/CUDAContext.h>

void handles() {
  auto blas = at::cuda::getCurrentCUDABlasHandle();
  auto sparse = at::cuda::getCurrentCUDASparseHandle();
  (void)blas;
  (void)sparse;
}
