"""Honest (session 42, KernelBench single file, CUDA): level-2 63_Gemm_ReLU_Divide fused into one tiled kernel (x @ W^T
+ b, ReLU, / divisor in the epilogue); the cpp_sources prototype spans two lines and gives the divisor a default
(`double divisor = 1.0);`), as LLM-written prototypes often do; ModelNew keeps the reference's nn.Linear."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor gemm_relu_div(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                            double divisor = 1.0);
"""

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#define TILE 32

__global__ void gemm_relu_div_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ b, float* __restrict__ y,
                                     int M, int N, int K, float inv_divisor) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        xs[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? x[(size_t)row * K + k0 + threadIdx.x] : 0.f;
        const int wrow = blockIdx.x * TILE + threadIdx.y;  // W is (N, K): load its tile so that ws[k][n]
        ws[threadIdx.x][threadIdx.y] = (wrow < N && k0 + threadIdx.x < K) ? w[(size_t)wrow * K + k0 + threadIdx.x] : 0.f;
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += xs[threadIdx.y][kk] * ws[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) y[(size_t)row * N + col] = fmaxf(acc + b[col], 0.f) * inv_divisor;
}

torch::Tensor gemm_relu_div(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double divisor) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.numel() == weight.size(0), "shapes do not match");
    TORCH_CHECK(divisor != 0.0, "divisor must be non-zero");
    const at::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int M = x.size(0), K = x.size(1), N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_relu_div_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), M, N, K,
        static_cast<float>(1.0 / divisor));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

gemm_relu_div = load_inline(
    name="gemm_relu_div",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_relu_div"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return gemm_relu_div.gemm_relu_div(x, self.linear.weight, self.linear.bias, self.divisor)
