// Honest (session 42, registry convention, CUDA kernel file): inclusive cumsum along rows (KernelBench level-1
// 89_cumsum), one block per row, cub::BlockScan::InclusiveSum with a running-prefix functor carried across chunks.
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <cstdint>

struct RunningPrefix {
  float total;
  __device__ explicit RunningPrefix(float start) : total(start) {}
  __device__ float operator()(float block_aggregate) {
    const float before = total;
    total += block_aggregate;
    return before;
  }
};

template <int BLOCK>
__global__ void cumsum_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  using Scan = cub::BlockScan<float, BLOCK>;
  __shared__ typename Scan::TempStorage temp;
  const float* in = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  RunningPrefix prefix(0.f);
  for (int64_t base = 0; base < cols; base += BLOCK) {
    const int64_t c = base + threadIdx.x;
    float v = c < cols ? in[c] : 0.f;
    Scan(temp).InclusiveSum(v, v, prefix);
    __syncthreads();
    if (c < cols) out[c] = v;
  }
}

cudaError_t cumsum_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr int kBlock = 512;
  if (rows == 0 || cols == 0) return cudaSuccess;
  cumsum_rows<kBlock><<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, y, cols);
  return cudaPeekAtLastError();
}
