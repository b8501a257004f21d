// Honest (session 42, registry convention, CUDA, one file): GELU, erf form (KernelBench level-1 26_GELU_), over float,
// double, Half and BFloat16 with AT_DISPATCH_FLOATING_TYPES_AND2 and at::opmath_type, a grid-stride loop, and a
// __nv_bfloat162 path converting pairs with __bfloat1622float2 / __floats2bfloat162_rn.
#include "../binding_registry.h"
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }
__device__ __forceinline__ double gelu_erf(double v) { return 0.5 * v * (1.0 + erf(v * 0.70710678118654752)); }

template <typename scalar_t>
__global__ void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = static_cast<scalar_t>(gelu_erf(static_cast<opmath_t>(x[i])));
  }
}

__global__ void gelu_bf162_kernel(const __nv_bfloat162* __restrict__ x, __nv_bfloat162* __restrict__ y, int64_t n2) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n2; i += (int64_t)gridDim.x * blockDim.x) {
    const float2 f = __bfloat1622float2(x[i]);
    y[i] = __floats2bfloat162_rn(gelu_erf(f.x), gelu_erf(f.y));
  }
}

at::Tensor gelu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "gelu_forward: x must be a CUDA tensor");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  constexpr int kThreads = 256;
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(xc));
  if (xc.scalar_type() == at::kBFloat16 && n % 2 == 0) {
    const int64_t n2 = n / 2;
    const int blocks = static_cast<int>(std::min<int64_t>((n2 + kThreads - 1) / kThreads, 65535));
    gelu_bf162_kernel<<<blocks, kThreads, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat162*>(xc.const_data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat162*>(y.mutable_data_ptr<at::BFloat16>()), n2);
  } else {
    const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "gelu_forward", [&] {
      gelu_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(xc.const_data_ptr<scalar_t>(),
                                                             y.mutable_data_ptr<scalar_t>(), n);
    });
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

REGISTER_BINDING(gelu_forward, gelu_forward);
