// Row sums: one block per row, float4 loads, warp-shuffle then shared-memory reduction.
#include <cstdint>
#include <cuda_runtime.h>

__inline__ __device__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
  const float* row = x + (int64_t)blockIdx.x * cols;
  float acc = 0.0f;
  if ((cols & 3) == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int64_t c = threadIdx.x; c < cols / 4; c += blockDim.x) {
      const float4 v = row4[c];
      acc += (v.x + v.y) + (v.z + v.w);
    }
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
  }
  __shared__ float partial[32];
  acc = warp_sum(acc);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
    acc = warp_sum(acc);
    if (lane == 0) out[blockIdx.x] = acc;
  }
}

cudaError_t row_sum_launch(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  row_sum_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, out, cols);
  return cudaGetLastError();
}
