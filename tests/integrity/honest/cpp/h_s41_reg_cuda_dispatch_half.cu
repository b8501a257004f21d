// Honest (session 41, registry convention, CUDA, one file): a scale-and-add kernel templated on the element type,
// dispatched with AT_DISPATCH_FLOATING_TYPES_AND_HALF; fp16 through at::Half / __half2 arithmetic on pairs.
#include "../binding_registry.h"
#include <ATen/Dispatch.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Half.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void axpy_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, scalar_t* __restrict__ out,
                            float alpha, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<scalar_t>(alpha * static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

__global__ void axpy_half2(const __half2* __restrict__ x, const __half2* __restrict__ y, __half2* __restrict__ out,
                           float alpha, int64_t n2) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n2) out[i] = __hfma2(__float2half2_rn(alpha), x[i], y[i]);
}

at::Tensor axpy_forward(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type(), "axpy_forward: x and y must match");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "axpy_forward: contiguous inputs expected");
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
  if (x.scalar_type() == at::kHalf && n % 2 == 0) {
    const int64_t n2 = n / 2;
    axpy_half2<<<static_cast<unsigned>((n2 + threads - 1) / threads), threads, 0, stream>>>(
        reinterpret_cast<const __half2*>(x.data_ptr<at::Half>()), reinterpret_cast<const __half2*>(y.data_ptr<at::Half>()),
        reinterpret_cast<__half2*>(out.data_ptr<at::Half>()), static_cast<float>(alpha), n2);
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "axpy_forward", [&] {
      axpy_kernel<scalar_t><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
          x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), static_cast<float>(alpha), n);
    });
  }
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "axpy_forward: launch failed");
  return out;
}

REGISTER_BINDING(axpy_forward, axpy_forward);
