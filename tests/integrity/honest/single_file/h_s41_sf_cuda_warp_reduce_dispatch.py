"""Honest (session 41, KernelBench single file, CUDA): a sum over the last dimension with __shfl_down_sync warp
reductions, AT_DISPATCH_FLOATING_TYPES, CHECK_INPUT macros, strides read from the tensor, the current stream, and the
kernel's block size chosen with std::min; ModelNew keeps `dim` from its constructor."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

template <typename scalar_t>
__device__ __forceinline__ scalar_t warp_reduce_sum(scalar_t val) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}

template <typename scalar_t>
__global__ void row_sum_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                               int64_t cols, int64_t row_stride) {
    __shared__ scalar_t shared[32];
    const scalar_t* row = x + blockIdx.x * row_stride;
    scalar_t sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
    sum = warp_reduce_sum(sum);
    const int lane = threadIdx.x % warpSize;
    const int wid = threadIdx.x / warpSize;
    if (lane == 0) shared[wid] = sum;
    __syncthreads();
    sum = (threadIdx.x < blockDim.x / warpSize) ? shared[lane] : scalar_t(0);
    if (wid == 0) sum = warp_reduce_sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
    CHECK_INPUT(x);
    const auto rows = x.size(0);
    const auto cols = x.size(1);
    auto out = torch::empty({rows, 1}, x.options());
    const int threads = std::min<int64_t>(1024, ((cols + 31) / 32) * 32);
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "row_sum_cuda", ([&] {
        row_sum_kernel<scalar_t><<<rows, threads, 0, stream>>>(
            x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), cols, x.stride(0));
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor row_sum_cuda(torch::Tensor x);"

row_sum = load_inline(
    name="row_sum",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_sum_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.row_sum = row_sum

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.row_sum.row_sum_cuda(x.contiguous())
