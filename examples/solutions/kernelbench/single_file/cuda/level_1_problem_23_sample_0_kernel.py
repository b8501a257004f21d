"""KernelBench level 1 problem 23 (23_Softmax): an honest CUDA kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor softmax_forward(torch::Tensor x);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

// One block per row: a max pass, an exp-and-sum pass, a scaling pass, each a block reduction.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float red[256];
  const float* in = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = __expf(in[c] - m);
    out[c] = e;
    sum += e;
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] *= inv;
}

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  softmax_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = softmax_launch(x_p, out_p, x.size(0), x.size(1), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p23_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x)
