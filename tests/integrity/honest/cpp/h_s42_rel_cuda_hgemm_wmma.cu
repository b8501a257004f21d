// Honest (session 42, CUDA-Agent release convention, CUDA, one file): matmul on tensor cores for fp16 inputs with the
// WMMA API (nvcuda::wmma fragments, fp32 accumulation staged through shared memory and rounded once with
// __float2half), a shared-memory tiled fp32 kernel otherwise; registered from the same file.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "../binding_registry.h"

using namespace nvcuda;

namespace {

constexpr int kWmma = 16;          // m = n = k = 16
constexpr int kWarpsPerBlock = 4;  // stacked along M
constexpr int kTile = 16;          // fp32 fallback

__global__ void hgemm_wmma_kernel(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
                                  int M, int N, int K) {
  __shared__ float staged[kWarpsPerBlock][kWmma * kWmma];
  const int warp = threadIdx.y, lane = threadIdx.x;
  const int tile_m = blockIdx.y * kWarpsPerBlock + warp, tile_n = blockIdx.x;
  if (tile_m * kWmma >= M) return;  // the whole warp leaves together
  wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += kWmma) {
    wmma::load_matrix_sync(fa, a + static_cast<size_t>(tile_m) * kWmma * K + k, K);
    wmma::load_matrix_sync(fb, b + static_cast<size_t>(k) * N + tile_n * kWmma, N);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(staged[warp], acc, kWmma, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < kWmma * kWmma; i += 32) {
    const int r = tile_m * kWmma + i / kWmma, col = tile_n * kWmma + i % kWmma;
    c[static_cast<size_t>(r) * N + col] = __float2half(staged[warp][i]);
  }
}

__global__ void sgemm_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                   int M, int N, int K) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    as[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? a[static_cast<size_t>(row) * K + k0 + threadIdx.x] : 0.f;
    bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? b[static_cast<size_t>(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) c[static_cast<size_t>(row) * N + col] = acc;
}

}  // namespace

torch::Tensor matmul_forward(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == b.scalar_type(), "matmul_forward: CUDA tensors of one dtype");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes do not match");
  const c10::cuda::CUDAGuard device_guard(a.device());
  const auto ac = a.contiguous();
  const auto bc = b.contiguous();
  const int M = static_cast<int>(ac.size(0)), K = static_cast<int>(ac.size(1)), N = static_cast<int>(bc.size(1));
  auto c = torch::empty({M, N}, ac.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (ac.scalar_type() == torch::kHalf) {
    TORCH_CHECK(M % kWmma == 0 && N % kWmma == 0 && K % kWmma == 0, "matmul_forward: fp16 sizes must be multiples of 16");
    const dim3 block(32, kWarpsPerBlock);
    const dim3 grid(N / kWmma, (M / kWmma + kWarpsPerBlock - 1) / kWarpsPerBlock);
    hgemm_wmma_kernel<<<grid, block, 0, stream>>>(reinterpret_cast<const __half*>(ac.data_ptr<at::Half>()),
                                                  reinterpret_cast<const __half*>(bc.data_ptr<at::Half>()),
                                                  reinterpret_cast<__half*>(c.data_ptr<at::Half>()), M, N, K);
  } else {
    TORCH_CHECK(ac.scalar_type() == torch::kFloat32, "matmul_forward: float16 or float32 expected");
    const dim3 block(kTile, kTile);
    const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    sgemm_tiled_kernel<<<grid, block, 0, stream>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(),
                                                   M, N, K);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}

void register_matmul(pybind11::module& m) { m.def("matmul_forward", &matmul_forward, "matmul (WMMA for fp16)"); }

REGISTER_BINDING(matmul, register_matmul);
