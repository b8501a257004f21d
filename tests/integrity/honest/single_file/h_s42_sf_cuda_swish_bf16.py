"""Honest (session 42, KernelBench single file, CUDA): Swish, x * sigmoid(x) (KernelBench level-1 25_Swish), over
float, Half and BFloat16 with AT_DISPATCH_FLOATING_TYPES_AND2 and overloaded __device__ helpers (__nv_bfloat16 through
__bfloat162float / __float2bfloat16, __half through __half2float / __float2half), a float4 path for aligned float32."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

swish_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

__device__ __forceinline__ float swishf(float v) { return v / (1.f + __expf(-v)); }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ float to_acc(c10::Half v) { return __half2float(static_cast<__half>(v)); }
__device__ __forceinline__ float to_acc(c10::BFloat16 v) { return __bfloat162float(static_cast<__nv_bfloat16>(v)); }
__device__ __forceinline__ void store(double* p, double v) { *p = v / (1.0 + exp(-v)); }
__device__ __forceinline__ void store(float* p, float v) { *p = swishf(v); }
__device__ __forceinline__ void store(c10::Half* p, float v) { *p = c10::Half(__float2half(swishf(v))); }
__device__ __forceinline__ void store(c10::BFloat16* p, float v) { *p = c10::BFloat16(__float2bfloat16(swishf(v))); }

template <typename scalar_t>
__global__ void swish_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store(y + i, to_acc(x[i]));
}

__global__ void swish_float4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        y[i] = make_float4(swishf(v.x), swishf(v.y), swishf(v.z), swishf(v.w));
    }
}

torch::Tensor swish_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "a CUDA tensor expected");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 8192);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (xc.scalar_type() == torch::kFloat32 && n % 4 == 0 &&
        reinterpret_cast<std::uintptr_t>(xc.data_ptr<float>()) % 16 == 0) {
        swish_float4_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                                            reinterpret_cast<float4*>(y.data_ptr<float>()), n / 4);
    } else {
        AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "swish", [&] {
            swish_kernel<scalar_t><<<blocks, threads, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
        });
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

swish = load_inline(
    name="swish_bf16",
    cpp_sources="torch::Tensor swish_forward(torch::Tensor x);",
    cuda_sources=swish_cuda,
    functions=["swish_forward"],
    with_cuda=True,
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swish.swish_forward(x)
