// relu(A @ W^T + b), fp32 (no TF32: the task's precision contract is fp32).
// 64x64 output tile per block, K in steps of 16 through shared memory, each of
// the 256 threads accumulating a 4x4 register tile; bias + ReLU fused on store.
#include <cstdint>
#include <cuda_runtime.h>

namespace {
constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4, THREADS = 256;
}

__global__ void __launch_bounds__(THREADS) gemm_bias_relu_kernel(const float* __restrict__ a, const float* __restrict__ w,
                                                              const float* __restrict__ bias, float* __restrict__ out,
                                                              int64_t m, int64_t n, int64_t k) {
  __shared__ float as[BK][BM + 4];
  __shared__ float ws[BK][BN + 4];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int64_t k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
    for (int r = 0; r < (BM * BK) / THREADS; ++r) {
      const int e = tid + r * THREADS;
      const int row = e / BK, kk = e % BK;
      const int64_t gk = k0 + kk;
      as[kk][row] = (m0 + row < m && gk < k) ? a[(m0 + row) * k + gk] : 0.0f;
      ws[kk][row] = (n0 + row < n && gk < k) ? w[(n0 + row) * k + gk] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = as[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = ws[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t row = m0 + ty * TM + i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t col = n0 + tx * TN + j;
      if (col < n) out[row * n + col] = fmaxf(acc[i][j] + bias[col], 0.0f);
    }
  }
}

cudaError_t gemm_bias_relu_launch(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                                  int64_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  const dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
  gemm_bias_relu_kernel<<<grid, THREADS, 0, stream>>>(a, w, bias, out, m, n, k);
  return cudaGetLastError();
}
