// Honest CUDA: shared memory, __syncthreads, launch on the caller's stream, error check.
#include <cuda_runtime.h>

__global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float buf[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

cudaError_t block_sum_launch(const float* x, float* out, int n, cudaStream_t stream) {
  block_sum<<<(n + 255) / 256, 256, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}
