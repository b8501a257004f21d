// Swish y = x * sigmoid(x): memory-bound, float4 loads/stores, grid-stride loop.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void swish_kernel(const float4* __restrict__ x4, float4* __restrict__ y4, const float* __restrict__ x,
                             float* __restrict__ y, int64_t n4, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = v.x / (1.0f + __expf(-v.x));
    v.y = v.y / (1.0f + __expf(-v.y));
    v.z = v.z / (1.0f + __expf(-v.z));
    v.w = v.w / (1.0f + __expf(-v.w));
    y4[i] = v;
  }
  // Tail (n not a multiple of 4), done by the first threads of block 0.
  if (blockIdx.x == 0) {
    for (int64_t i = n4 * 4 + threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] / (1.0f + __expf(-x[i]));
  }
}

cudaError_t swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t n4 = n / 4;
  int64_t blocks = (n4 + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : (blocks > 132 * 32 ? 132 * 32 : blocks);
  swish_kernel<<<(unsigned)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                                          x, y, n4, n);
  return cudaGetLastError();
}
