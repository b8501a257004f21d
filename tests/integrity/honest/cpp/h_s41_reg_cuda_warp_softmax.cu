// Honest (session 41, registry convention, CUDA kernel file): row softmax, one block per row, warp reductions with
// __shfl_xor_sync, partial results in extern __shared__ memory, launched on the stream it is given.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
  return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  extern __shared__ float partial[];
  const int64_t row = blockIdx.x;
  const float* in = x + row * cols;
  float* out = y + row * cols;
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const int warps = blockDim.x / WARP_SIZE;

  float m = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  m = warp_max(m);
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  m = lane < warps ? partial[lane] : -FLT_MAX;
  m = warp_max(m);
  __syncthreads();

  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(in[c] - m);
  s = warp_sum(s);
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  s = lane < warps ? partial[lane] : 0.0f;
  s = warp_sum(s);

  const float inv = 1.0f / s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m) * inv;
}

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int threads = 256;
  const size_t smem = (threads / WARP_SIZE) * sizeof(float);
  softmax_rows<<<static_cast<unsigned>(rows), threads, smem, stream>>>(x, y, cols);
  return cudaGetLastError();
}
