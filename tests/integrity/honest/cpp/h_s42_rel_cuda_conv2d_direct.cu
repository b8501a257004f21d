// Honest (session 42, CUDA-Agent release convention, CUDA kernel file): direct 2-D convolution (KernelBench level-1
// "standard 2D convolution"), one output channel's filter staged in dynamic shared memory per block,
// torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> for x, weight and y, an optional bias.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int kTile = 16;

__global__ void conv2d_direct_kernel(const torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> x,
                                     const torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> w,
                                     const float* __restrict__ bias,
                                     torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> y, int stride,
                                     int padding, int dilation) {
  extern __shared__ float w_s[];  // C_in * KH * KW taps of this block's output channel
  const int c_out = y.size(1);
  const int n = blockIdx.z / c_out, oc = blockIdx.z % c_out;
  const int c_in = w.size(1), kh = w.size(2), kw = w.size(3);
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int i = tid; i < c_in * kh * kw; i += blockDim.x * blockDim.y) {
    w_s[i] = w[oc][i / (kh * kw)][(i / kw) % kh][i % kw];
  }
  __syncthreads();
  const int oh = blockIdx.y * kTile + threadIdx.y, ow = blockIdx.x * kTile + threadIdx.x;
  if (oh >= y.size(2) || ow >= y.size(3)) return;
  float acc = bias != nullptr ? bias[oc] : 0.f;
  for (int ci = 0; ci < c_in; ++ci) {
    for (int r = 0; r < kh; ++r) {
      const int ih = oh * stride - padding + r * dilation;
      if (ih < 0 || ih >= x.size(2)) continue;
      for (int s = 0; s < kw; ++s) {
        const int iw = ow * stride - padding + s * dilation;
        if (iw >= 0 && iw < x.size(3)) acc += x[n][ci][ih][iw] * w_s[(ci * kh + r) * kw + s];
      }
    }
  }
  y[n][oc][oh][ow] = acc;
}

torch::Tensor conv2d_forward(const torch::Tensor& x, const torch::Tensor& weight,
                             const c10::optional<torch::Tensor>& bias, int64_t stride, int64_t padding,
                             int64_t dilation) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "conv2d_forward: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && x.size(1) == weight.size(1),
              "conv2d_forward: x is (N, C, H, W) and weight (O, C, KH, KW)");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const auto xc = x.contiguous();
  const auto wc = weight.contiguous();
  const int64_t n = xc.size(0), c_in = xc.size(1), h = xc.size(2), w = xc.size(3);
  const int64_t c_out = wc.size(0), kh = wc.size(2), kw = wc.size(3);
  const int64_t out_h = (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1;
  const int64_t out_w = (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1;
  TORCH_CHECK(out_h > 0 && out_w > 0, "conv2d_forward: empty output");
  auto y = torch::empty({n, c_out, out_h, out_w}, xc.options());
  c10::optional<torch::Tensor> bc;
  if (bias.has_value() && bias->defined()) bc = bias->contiguous();
  const size_t smem = sizeof(float) * c_in * kh * kw;
  TORCH_CHECK(smem <= 48 * 1024, "conv2d_forward: the filter of one output channel must fit in 48 KiB");
  const dim3 block(kTile, kTile);
  const dim3 grid((out_w + kTile - 1) / kTile, (out_h + kTile - 1) / kTile, n * c_out);
  conv2d_direct_kernel<<<grid, block, smem, at::cuda::getCurrentCUDAStream()>>>(
      xc.packed_accessor32<float, 4, torch::RestrictPtrTraits>(),
      wc.packed_accessor32<float, 4, torch::RestrictPtrTraits>(), bc.has_value() ? bc->data_ptr<float>() : nullptr,
      y.packed_accessor32<float, 4, torch::RestrictPtrTraits>(), static_cast<int>(stride), static_cast<int>(padding),
      static_cast<int>(dilation));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
