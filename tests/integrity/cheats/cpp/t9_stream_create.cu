// expect: T9.cpp.stream
__global__ void k(float* y) { y[threadIdx.x] = 1.f; }
void launch(float* y) {
  cudaStream_t side;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  k<<<1, 32, 0, side>>>(y);
}
