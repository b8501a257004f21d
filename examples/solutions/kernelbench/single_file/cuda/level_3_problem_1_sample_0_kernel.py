"""KernelBench level 3 problem 1 (1_MLP): an honest CUDA kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale, double slope);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <cuda_runtime.h>

constexpr int TILE = 32;

// C[m, n] = sum_p A[m, p] * B(p, n); B(p, n) = b[p * n_cols + n] (plain) or b[n * k + p] (transposed: a Linear weight).
template <bool kTransposedB, bool kEpilogue>
__global__ void tiled_gemm(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                           float* __restrict__ c, int64_t m, int64_t k, int64_t n, float scale, float slope) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE + 1];
  const int64_t row = blockIdx.y * (int64_t)TILE + threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)TILE + threadIdx.x;
  float acc = 0.0f;
  for (int64_t t = 0; t < k; t += TILE) {
    const int64_t ak = t + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[row * k + ak] : 0.0f;
    const int64_t bk = t + threadIdx.y;
    float bv = 0.0f;
    if (bk < k && col < n) bv = kTransposedB ? b[col * k + bk] : b[bk * n + col];
    bs[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < TILE; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) {
    float v = acc;
    if (kEpilogue) {
      v = (v + bias[col]) * scale;
      v = v > 0.0f ? v : slope * v;
    }
    c[row * n + col] = v;
  }
}

static dim3 grid_for(int64_t m, int64_t n) {
  return dim3(static_cast<unsigned>((n + TILE - 1) / TILE), static_cast<unsigned>((m + TILE - 1) / TILE));
}

cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                              int64_t out, float scale, float slope, cudaStream_t stream) {
  tiled_gemm<true, true><<<grid_for(rows, out), dim3(TILE, TILE), 0, stream>>>(x, w, bias, y, rows, in, out, scale,
                                                                               slope);
  return cudaGetLastError();
}

torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale, double slope) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "linear_act_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(w.is_contiguous() && w.scalar_type() == at::kFloat, "linear_act_forward: w must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "linear_act_forward: b must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "linear_act_forward: x must be a CUDA tensor");
  TORCH_CHECK(w.is_cuda(), "linear_act_forward: w must be a CUDA tensor");
  TORCH_CHECK(b.is_cuda(), "linear_act_forward: b must be a CUDA tensor");
  auto out = torch::empty({x.size(0), w.size(0)}, x.options());
  const float* x_p = x.const_data_ptr<float>();
  const float* w_p = w.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = linear_act_launch(x_p, w_p, b_p, out_p, x.size(0), x.size(1), w.size(0), (float)scale, (float)slope, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "linear_act_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

ext = load_inline(
    name="kb_l3_p1_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_act_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        # network = [Linear, ReLU] * hidden layers + [Linear]: a fused linear+ReLU per hidden layer.
        n = len(self.network)
        for i in range(0, n, 2):
            layer = self.network[i]
            slope = 0.0 if i + 1 < n else 1.0
            x = ext.linear_act_forward(x, layer.weight, layer.bias, 1.0, slope)
        return x
