// Honest (session 42, CUDA-Agent release convention, CUDA kernel file): BatchNorm2d in training mode (KernelBench
// level-1 33_BatchNorm: the batch's statistics), one block per channel for the mean and the biased variance (two
// passes, warp sums with __shfl_down_sync, a templated block reduction), then a normalize kernel; the output, the
// batch mean and the inverse std returned as std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <tuple>

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

template <int BLOCK>
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < BLOCK / 32 ? scratch[lane] : 0.f;
  if (warp == 0) v = warp_sum(v);
  __syncthreads();  // scratch is reused by the next call
  return v;         // the sum, in thread 0
}

template <int BLOCK>
__global__ void channel_stats(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ invstd,
                              int n, int c, int hw, float eps) {
  __shared__ float scratch[BLOCK / 32];
  __shared__ float s_mean;
  const int ch = blockIdx.x;
  const int64_t count = static_cast<int64_t>(n) * hw;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < count; i += BLOCK) s += x[(i / hw * c + ch) * hw + i % hw];
  s = block_sum<BLOCK>(s, scratch);
  if (threadIdx.x == 0) s_mean = s / static_cast<float>(count);
  __syncthreads();
  const float m = s_mean;
  float q = 0.f;
  for (int64_t i = threadIdx.x; i < count; i += BLOCK) {
    const float d = x[(i / hw * c + ch) * hw + i % hw] - m;
    q += d * d;
  }
  q = block_sum<BLOCK>(q, scratch);
  if (threadIdx.x == 0) {
    mean[ch] = m;
    invstd[ch] = rsqrtf(q / static_cast<float>(count) + eps);
  }
}

__global__ void normalize(const float* __restrict__ x, const float* __restrict__ mean,
                          const float* __restrict__ invstd, const float* __restrict__ gamma,
                          const float* __restrict__ beta, float* __restrict__ y, int64_t total, int c, int hw) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int ch = static_cast<int>((i / hw) % c);
    y[i] = (x[i] - mean[ch]) * invstd[ch] * gamma[ch] + beta[ch];
  }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> batch_norm_forward(const torch::Tensor& x,
                                                                           const torch::Tensor& weight,
                                                                           const torch::Tensor& bias, double eps) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 4 && x.scalar_type() == torch::kFloat32,
              "batch_norm_forward: a 4-D float32 CUDA tensor expected");
  TORCH_CHECK(x.is_contiguous(torch::MemoryFormat::Contiguous), "batch_norm_forward: NCHW-contiguous input expected");
  const at::cuda::CUDAGuard device_guard(x.device());
  const int n = static_cast<int>(x.size(0)), c = static_cast<int>(x.size(1));
  const int hw = static_cast<int>(x.size(2) * x.size(3));
  auto mean = torch::empty({c}, x.options());
  auto invstd = torch::empty({c}, x.options());
  auto y = torch::empty_like(x);
  const auto w = weight.contiguous(), b = bias.contiguous();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  constexpr int kBlock = 512;
  channel_stats<kBlock><<<c, kBlock, 0, stream>>>(x.data_ptr<float>(), mean.data_ptr<float>(),
                                                  invstd.data_ptr<float>(), n, c, hw, static_cast<float>(eps));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t total = x.numel();
  const int blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 4096));
  normalize<<<blocks, 256, 0, stream>>>(x.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(),
                                        w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), total, c, hw);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return std::make_tuple(y, mean, invstd);
}
