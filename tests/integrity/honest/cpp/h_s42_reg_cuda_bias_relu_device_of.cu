// Honest (session 42, registry convention, CUDA, one file): the bias + ReLU epilogue of a level-2 "Gemm + BiasAdd +
// ReLU" problem, the device guard taken as `at::cuda::OptionalCUDAGuard device_guard(at::device_of(x))` (PyTorch's
// extension tutorial idiom), an optional bias, __ldg loads, a grid-stride loop sized from the SM count.
#include "../binding_registry.h"
#include <ATen/DeviceGuard.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <optional>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    const float v = __ldg(x + i) + (bias != nullptr ? __ldg(bias + i % cols) : 0.f);
    y[i] = fmaxf(v, 0.f);
  }
}

at::Tensor bias_relu_forward(const at::Tensor& x, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == at::kFloat,
              "bias_relu_forward: a 2-D float32 CUDA tensor expected");
  const at::cuda::OptionalCUDAGuard device_guard(at::device_of(x));
  const at::Tensor xc = x.contiguous();
  at::Tensor bc;
  if (bias.has_value()) {
    TORCH_CHECK(bias->numel() == xc.size(1), "bias_relu_forward: bias must have x.size(1) elements");
    bc = bias->contiguous();
  }
  at::Tensor y = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, int64_t{sms} * 8));
  bias_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), bc.defined() ? bc.data_ptr<float>() : nullptr, y.data_ptr<float>(), n, xc.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

REGISTER_BINDING(bias_relu_forward, bias_relu_forward);
