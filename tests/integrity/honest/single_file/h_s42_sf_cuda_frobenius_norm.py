"""Honest (session 42, KernelBench single file, CUDA): Frobenius-norm normalisation (KernelBench level-1
37_FrobeniusNorm_) in two kernels on the current stream: a grid-stride sum of squares with float4 loads and one
atomicAdd per block into a scratch scalar cleared with cudaMemsetAsync (C10_CUDA_CHECK), then a scale by its rsqrt."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fro_cuda = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>

__global__ void sum_squares_kernel(const float4* __restrict__ x4, const float* __restrict__ x, int64_t n,
                                   float* __restrict__ total) {
    __shared__ float partial[32];
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    float s = 0.f;
    for (int64_t i = tid; i < n / 4; i += stride) {
        const float4 v = x4[i];
        s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int64_t i = n / 4 * 4 + tid; i < n; i += stride) s += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
        if (threadIdx.x == 0) atomicAdd(total, s);
    }
}

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                             const float* __restrict__ total) {
    const float inv = rsqrtf(*total);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] * inv;
}

torch::Tensor frobenius_normalize(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor expected");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto total = torch::empty({1}, xc.options());
    const int64_t n = xc.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    C10_CUDA_CHECK(cudaMemsetAsync(total.data_ptr<float>(), 0, sizeof(float), stream));
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 1024);
    sum_squares_kernel<<<std::max(blocks, 1), threads, 0, stream>>>(
        reinterpret_cast<const float4*>(xc.data_ptr<float>()), xc.data_ptr<float>(), n, total.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    scale_kernel<<<std::max(blocks, 1), threads, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n,
                                                            total.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

frobenius = load_inline(
    name="frobenius_normalize",
    cpp_sources=["torch::Tensor frobenius_normalize(torch::Tensor x);"],
    cuda_sources=[fro_cuda],
    functions=["frobenius_normalize"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return frobenius.frobenius_normalize(x)
