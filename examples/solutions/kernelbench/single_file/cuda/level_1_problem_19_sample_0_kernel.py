"""KernelBench level 1 problem 19 (19_ReLU): an honest CUDA kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 * 8 ? (want > 0 ? want : 1) : 65535 * 8);
  relu_kernel<<<blocks, threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = relu_launch(x_p, out_p, x.numel(), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "relu_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p19_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
