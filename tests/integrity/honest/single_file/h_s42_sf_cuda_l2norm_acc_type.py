"""Honest (session 42, KernelBench single file, CUDA): L2 normalisation over dim 1 (KernelBench level-1 39_L2Norm_),
one block per row, the sum of squares accumulated in at::acc_type<scalar_t, true> and reduced with __shfl_xor_sync,
AT_DISPATCH_FLOATING_TYPES_AND_HALF, a templated block size; the module built once at import."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

l2_cuda = r"""
#include <torch/extension.h>
#include <ATen/AccumulateType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename T>
__device__ __forceinline__ T warp_allreduce_sum(T v) {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(0xffffffff, v, mask);
    return v;
}

template <typename scalar_t, int BLOCK>
__global__ void l2_normalize_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t cols) {
    using acc_t = at::acc_type<scalar_t, true>;
    __shared__ acc_t warp_sums[BLOCK / 32];
    __shared__ acc_t inv_norm;
    const scalar_t* in = x + blockIdx.x * cols;
    scalar_t* out = y + blockIdx.x * cols;
    acc_t sq = 0;
    for (int64_t c = threadIdx.x; c < cols; c += BLOCK) {
        const acc_t v = static_cast<acc_t>(in[c]);
        sq += v * v;
    }
    sq = warp_allreduce_sum(sq);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sq;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc_t t = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : acc_t(0);
        t = warp_allreduce_sum(t);
        if (threadIdx.x == 0) inv_norm = acc_t(1) / sqrt(t);
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += BLOCK) {
        out[c] = static_cast<scalar_t>(static_cast<acc_t>(in[c]) * inv_norm);
    }
}

torch::Tensor l2_normalize(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "a 2-D CUDA tensor expected");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    constexpr int kBlock = 512;
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(xc.scalar_type(), "l2_normalize", [&] {
        l2_normalize_kernel<scalar_t, kBlock><<<xc.size(0), kBlock, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), xc.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

l2_norm = load_inline(
    name="l2_norm_rows",
    cpp_sources="torch::Tensor l2_normalize(torch::Tensor x);",
    cuda_sources=l2_cuda,
    functions=["l2_normalize"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2_norm.l2_normalize(x)
