#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 * 8 ? (want > 0 ? want : 1) : 65535 * 8);
  relu_kernel<<<blocks, threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
