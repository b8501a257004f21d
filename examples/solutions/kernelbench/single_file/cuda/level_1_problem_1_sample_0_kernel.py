"""KernelBench level 1 problem 1 (1_Square_matrix_multiplication_): an honest CUDA kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);
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

cudaError_t matmul_launch(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                          cudaStream_t stream) {
  tiled_gemm<false, false><<<grid_for(m, n), dim3(TILE, TILE), 0, stream>>>(a, b, nullptr, c, m, k, n, 1.0f, 1.0f);
  return cudaGetLastError();
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_contiguous() && a.scalar_type() == at::kFloat, "matmul_forward: a must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "matmul_forward: b must be a contiguous float32 tensor");
  TORCH_CHECK(a.is_cuda(), "matmul_forward: a must be a CUDA tensor");
  TORCH_CHECK(b.is_cuda(), "matmul_forward: b must be a CUDA tensor");
  auto out = torch::empty({a.size(0), b.size(1)}, a.options());
  const float* a_p = a.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = matmul_launch(a_p, b_p, out_p, a.size(0), a.size(1), b.size(1), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

ext = load_inline(
    name="kb_l1_p1_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul_forward(A, B)
