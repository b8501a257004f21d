// Honest (session 42, CUDA-Agent release convention, CUDA kernel file): the fused Linear + GELU of level-2 problems
// such as 99_Matmul_GELU_Softmax,
// y = gelu(x @ W^T + b), register-tiled (4 x 4 outputs a thread), the shared tiles read as float4, the sizes in a
// struct passed by value, the bias and the erf GELU applied in the epilogue.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

namespace fused {

struct GemmShape {
  int M, N, K;
};

constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

__global__ void __launch_bounds__(kThreads)
    linear_gelu_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                       float* __restrict__ y, const GemmShape s) {
  __shared__ __align__(16) float xs[BK][BM];  // x tile, transposed
  __shared__ __align__(16) float ws[BK][BN];  // W tile, transposed (W is N x K)
  const int tid = threadIdx.x;
  const int ty = tid / (BN / TN), tx = tid % (BN / TN);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < s.K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {
      const int r = i / BK, kk = i % BK;
      xs[kk][r] = (m0 + r < s.M && k0 + kk < s.K) ? x[static_cast<size_t>(m0 + r) * s.K + k0 + kk] : 0.f;
      ws[kk][r] = (n0 + r < s.N && k0 + kk < s.K) ? w[static_cast<size_t>(n0 + r) * s.K + k0 + kk] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[kk][ty * TM]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tx * TN]);
      const float av[TM] = {a.x, a.y, a.z, a.w};
      const float bv[TN] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = m0 + ty * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = n0 + tx * TN + j;
      if (r < s.M && c < s.N) y[static_cast<size_t>(r) * s.N + c] = gelu(acc[i][j] + (bias ? bias[c] : 0.f));
    }
  }
}

}  // namespace fused

torch::Tensor linear_gelu_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                  const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "linear_gelu_forward: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_gelu_forward: bad shapes");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const auto xc = x.contiguous();
  const auto wc = weight.contiguous();
  const fused::GemmShape s{static_cast<int>(xc.size(0)), static_cast<int>(wc.size(0)), static_cast<int>(xc.size(1))};
  auto y = torch::empty({s.M, s.N}, xc.options());
  torch::Tensor bc;
  if (bias.has_value()) bc = bias->contiguous();
  const dim3 grid((s.N + fused::BN - 1) / fused::BN, (s.M + fused::BM - 1) / fused::BM);
  fused::linear_gelu_kernel<<<grid, fused::kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), wc.data_ptr<float>(), bc.defined() ? bc.data_ptr<float>() : nullptr, y.data_ptr<float>(),
      s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

torch::Tensor linear_gelu_no_bias(const torch::Tensor& x, const torch::Tensor& weight) {
  return linear_gelu_forward(x, weight, c10::nullopt);
}
