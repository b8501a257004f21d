// Row softmax: one block per row; pass 1 computes the running max and rescaled
// sum together (online softmax), pass 2 writes exp(x - max) / sum.
#include <cstdint>
#include <cuda_runtime.h>
#include <math_constants.h>

struct MaxSum {
  float m;
  float s;
};

__inline__ __device__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -CUDART_INF_F) return {m, 0.0f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__inline__ __device__ MaxSum warp_combine(MaxSum v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o{__shfl_down_sync(0xffffffffu, v.m, off), __shfl_down_sync(0xffffffffu, v.s, off)};
    v = combine(v, o);
  }
  return v;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  const float* in = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  MaxSum acc{-CUDART_INF_F, 0.0f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc = combine(acc, MaxSum{in[c], 1.0f});
  acc = warp_combine(acc);
  __shared__ MaxSum partial[32];
  __shared__ MaxSum total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    MaxSum v = lane < (int)(blockDim.x >> 5) ? partial[lane] : MaxSum{-CUDART_INF_F, 0.0f};
    v = warp_combine(v);
    if (lane == 0) total = v;
  }
  __syncthreads();
  const float m = total.m, inv = 1.0f / total.s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m) * inv;
}

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  softmax_kernel<<<(unsigned)rows, 512, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}
