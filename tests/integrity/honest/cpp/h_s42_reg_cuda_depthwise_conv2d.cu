// Honest (session 42, registry convention, CUDA kernel file): depthwise 2-D convolution (KernelBench level-1
// "depthwise 2D convolution") through at::PackedTensorAccessor32<float, 4, at::RestrictPtrTraits>, the geometry in a
// struct passed by value, a 3-D grid (z = batch x channel) whose block shape is `dim3 num_threads(16, 16)`.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <optional>

struct DepthwiseParams {
  int channels, in_h, in_w, out_h, out_w, kernel, stride, pad;
};

__global__ void depthwise_conv2d_kernel(const at::PackedTensorAccessor32<float, 4, at::RestrictPtrTraits> x,
                                        const at::PackedTensorAccessor32<float, 4, at::RestrictPtrTraits> w,
                                        const float* __restrict__ bias,
                                        at::PackedTensorAccessor32<float, 4, at::RestrictPtrTraits> y,
                                        const DepthwiseParams p) {
  const int ow = blockIdx.x * blockDim.x + threadIdx.x;
  const int oh = blockIdx.y * blockDim.y + threadIdx.y;
  const int n = blockIdx.z / p.channels;
  const int c = blockIdx.z % p.channels;
  if (oh >= p.out_h || ow >= p.out_w) return;
  float acc = bias != nullptr ? bias[c] : 0.f;
  for (int i = 0; i < p.kernel; ++i) {
    const int ih = oh * p.stride - p.pad + i;
    if (ih < 0 || ih >= p.in_h) continue;
#pragma unroll 4
    for (int j = 0; j < p.kernel; ++j) {
      const int iw = ow * p.stride - p.pad + j;
      if (iw >= 0 && iw < p.in_w) acc += x[n][c][ih][iw] * w[c][0][i][j];
    }
  }
  y[n][c][oh][ow] = acc;
}

at::Tensor depthwise_conv2d_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                 int64_t stride, int64_t padding) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "depthwise_conv2d_cuda: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == 1 && weight.size(0) == x.size(1),
              "depthwise_conv2d_cuda: x is (N, C, H, W) and weight (C, 1, K, K)");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  DepthwiseParams p{};
  p.channels = static_cast<int>(xc.size(1));
  p.in_h = static_cast<int>(xc.size(2));
  p.in_w = static_cast<int>(xc.size(3));
  p.kernel = static_cast<int>(wc.size(2));
  p.stride = static_cast<int>(stride);
  p.pad = static_cast<int>(padding);
  p.out_h = (p.in_h + 2 * p.pad - p.kernel) / p.stride + 1;
  p.out_w = (p.in_w + 2 * p.pad - p.kernel) / p.stride + 1;
  at::Tensor y = at::empty({xc.size(0), xc.size(1), p.out_h, p.out_w}, xc.options());
  at::Tensor bc;
  if (bias.has_value() && bias->defined()) bc = bias->contiguous();
  dim3 num_threads(16, 16);
  dim3 num_blocks((p.out_w + 15) / 16, (p.out_h + 15) / 16, static_cast<unsigned>(xc.size(0) * p.channels));
  depthwise_conv2d_kernel<<<num_blocks, num_threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.packed_accessor32<float, 4, at::RestrictPtrTraits>(), wc.packed_accessor32<float, 4, at::RestrictPtrTraits>(),
      bc.defined() ? bc.data_ptr<float>() : nullptr, y.packed_accessor32<float, 4, at::RestrictPtrTraits>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
