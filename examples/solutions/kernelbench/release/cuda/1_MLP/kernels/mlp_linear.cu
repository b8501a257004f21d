#include <cstdint>
#include <cuda_runtime.h>

constexpr int TILE = 32;

// C[m, n] = sum_p A[m, p] * B(p, n); B(p, n) = b[p * n_cols + n] (plain) or b[n * k + p] (transposed: a Linear weight).
template <bool kTransposedB, bool kEpilogue>
__global__ void tiled_gemm(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                           float* __restrict__ c, int64_t m, int64_t k, int64_t n, float scale, float slope) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE + 1];
  const int64_t row = blockIdx.y * (int64_t)TILE + threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)TILE + threadIdx.x;
  float acc = 0.0f;
  for (int64_t t = 0; t < k; t += TILE) {
    const int64_t ak = t + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[row * k + ak] : 0.0f;
    const int64_t bk = t + threadIdx.y;
    float bv = 0.0f;
    if (bk < k && col < n) bv = kTransposedB ? b[col * k + bk] : b[bk * n + col];
    bs[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < TILE; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) {
    float v = acc;
    if (kEpilogue) {
      v = (v + bias[col]) * scale;
      v = v > 0.0f ? v : slope * v;
    }
    c[row * n + col] = v;
  }
}

static dim3 grid_for(int64_t m, int64_t n) {
  return dim3(static_cast<unsigned>((n + TILE - 1) / TILE), static_cast<unsigned>((m + TILE - 1) / TILE));
}

cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                              int64_t out, float scale, float slope, cudaStream_t stream) {
  tiled_gemm<true, true><<<grid_for(rows, out), dim3(TILE, TILE), 0, stream>>>(x, w, bias, y, rows, in, out, scale,
                                                                               slope);
  return cudaGetLastError();
}
