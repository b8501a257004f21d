// Honest (session 42, CUDA-Agent release convention, CUDA kernel file): RMSNorm over the feature dimension of a
// (B, F, d1, d2) input (KernelBench level-1 36_RMSNorm_), one thread per (b, d1, d2) position so that reads are
// coalesced; the kernel templated on its block size (__launch_bounds__(BLOCK)) and picked with a switch.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__device__ __forceinline__ float inv_rms(float sum_sq, int features, float eps) {
  return rsqrtf(sum_sq / static_cast<float>(features) + eps);
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t batch, int features, int64_t spatial,
                    float eps) {
  const int64_t pos = blockIdx.x * (int64_t)BLOCK + threadIdx.x;
  if (pos >= batch * spatial) return;
  const int64_t b = pos / spatial, s = pos % spatial;
  const float* in = x + b * features * spatial + s;
  float* out = y + b * features * spatial + s;
  float sum_sq = 0.f;
  for (int f = 0; f < features; ++f) {
    const float v = in[f * spatial];
    sum_sq = fmaf(v, v, sum_sq);
  }
  const float scale = inv_rms(sum_sq, features, eps);
  for (int f = 0; f < features; ++f) out[f * spatial] = in[f * spatial] * scale;
}

template <int BLOCK>
static void launch_rms(const torch::Tensor& x, torch::Tensor& y, int64_t spatial, float eps, cudaStream_t stream) {
  const int64_t batch = x.size(0), positions = batch * spatial;
  const auto blocks = static_cast<unsigned>((positions + BLOCK - 1) / BLOCK);
  rms_norm_kernel<BLOCK><<<blocks, BLOCK, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), batch,
                                                       static_cast<int>(x.size(1)), spatial, eps);
}

torch::Tensor rms_norm_forward(const torch::Tensor& x, double eps) {
  TORCH_CHECK(x.is_cuda() && x.dim() >= 2 && x.scalar_type() == torch::kFloat32,
              "rms_norm_forward: a float32 CUDA tensor of at least 2 dimensions expected");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t spatial = xc.numel() / (xc.size(0) * xc.size(1));
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  switch (spatial >= 4096 ? 256 : 128) {
    case 256:
      launch_rms<256>(xc, y, spatial, static_cast<float>(eps), stream);
      break;
    default:
      launch_rms<128>(xc, y, spatial, static_cast<float>(eps), stream);
      break;
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
