// Honest (session 42, registry convention, CUDA, one file): register-tiled SGEMM (KernelBench 1_Square_matrix_
// multiplication_) whose 64 KiB tile of dynamic shared memory (extern __shared__ __align__(16)) is past the 48 KiB
// default, so the launch first raises the limit with cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicShared-
// MemorySize, ...) after checking sharedMemPerBlockOptin; templated tile sizes, __launch_bounds__, fmaf.
#include "../binding_registry.h"
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    matmul_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                        int K) {
  extern __shared__ __align__(16) float smem[];
  float* As = smem;            // [BK][BM]: the A tile, transposed
  float* Bs = smem + BK * BM;  // [BK][BN]
  constexpr int kThreads = (BM / TM) * (BN / TN);
  const int tid = threadIdx.x;
  const int tr = tid / (BN / TN), tc = tid % (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {
      const int r = i / BK, kk = i % BK;
      As[kk * BM + r] = (row0 + r < M && k0 + kk < K) ? A[static_cast<size_t>(row0 + r) * K + k0 + kk] : 0.f;
    }
    for (int i = tid; i < BK * BN; i += kThreads) {
      const int kk = i / BN, c = i % BN;
      Bs[kk * BN + c] = (k0 + kk < K && col0 + c < N) ? B[static_cast<size_t>(k0 + kk) * N + col0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk * BM + tr * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[kk * BN + tc * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + tr * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tc * TN + j;
      if (r < M && c < N) C[static_cast<size_t>(r) * N + c] = acc[i][j];
    }
  }
}

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "matmul_forward: CUDA tensors expected");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes do not match");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "matmul_forward: float32 expected");
  const c10::cuda::CUDAGuard device_guard(a.device());
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int M = static_cast<int>(ac.size(0)), K = static_cast<int>(ac.size(1)), N = static_cast<int>(bc.size(1));
  at::Tensor c = at::empty({M, N}, ac.options());
  constexpr int BM = 128, BN = 128, BK = 64, TM = 8, TN = 8;
  constexpr size_t kSmem = sizeof(float) * BK * (BM + BN);  // 64 KiB
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(prop->sharedMemPerBlockOptin >= kSmem, "matmul_forward: the device offers ",
              prop->sharedMemPerBlockOptin, " bytes of shared memory per block, ", kSmem, " needed");
  auto kernel = matmul_tiled_kernel<BM, BN, BK, TM, TN>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
  const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  kernel<<<grid, (BM / TM) * (BN / TN), kSmem, at::cuda::getCurrentCUDAStream()>>>(
      ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}

REGISTER_BINDING(matmul_forward, matmul_forward);
