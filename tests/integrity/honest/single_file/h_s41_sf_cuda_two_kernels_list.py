"""Honest (session 41, KernelBench single file, CUDA): sources given as lists (`cpp_sources=[...]`,
`cuda_sources=[a, b]`), two kernels (a row max, then exp-normalise) and a host function returning
std::vector<torch::Tensor>; forward unpacks the pair and returns the first."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kernels_a = r"""
#include <cuda_runtime.h>
#include <cfloat>

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ m, int cols) {
    __shared__ float s[256];
    const float* in = x + (size_t)blockIdx.x * cols;
    float v = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) v = fmaxf(v, in[c]);
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + k]);
        __syncthreads();
    }
    if (threadIdx.x == 0) m[blockIdx.x] = s[0];
}

__global__ void exp_normalize_kernel(const float* __restrict__ x, const float* __restrict__ m,
                                     float* __restrict__ y, int cols) {
    __shared__ float s[256];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += __expf(in[c] - m[blockIdx.x]);
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    const float inv = 1.f / s[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m[blockIdx.x]) * inv;
}
"""

kernels_b = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <vector>

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ m, int cols);
__global__ void exp_normalize_kernel(const float* __restrict__ x, const float* __restrict__ m,
                                     float* __restrict__ y, int cols);

std::vector<torch::Tensor> softmax_with_max(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto m = torch::empty({xc.size(0)}, xc.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    row_max_kernel<<<xc.size(0), 256, 0, stream>>>(xc.data_ptr<float>(), m.data_ptr<float>(), (int)xc.size(1));
    exp_normalize_kernel<<<xc.size(0), 256, 0, stream>>>(xc.data_ptr<float>(), m.data_ptr<float>(),
                                                         y.data_ptr<float>(), (int)xc.size(1));
    return {y, m};
}
"""

cpp_decl = "#include <torch/extension.h>\n#include <vector>\nstd::vector<torch::Tensor> softmax_with_max(torch::Tensor x);\n"

softmax_ext = load_inline(
    name="softmax_two_kernels",
    cpp_sources=[cpp_decl],
    cuda_sources=[kernels_a, kernels_b],
    functions=["softmax_with_max"],
    with_cuda=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y, _row_max = softmax_ext.softmax_with_max(x)
        return y
