// Honest (session 41, registry convention, CUDA, one file): a full sum with a shared-memory tree per block and one
// atomicAdd per block into an output zeroed by at::zeros; a __device__ helper and __syncthreads.
#include "../binding_registry.h"
#include <ATen/ops/zeros.h>
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void sum_kernel(const float* __restrict__ x, float* __restrict__ total, int64_t n) {
  __shared__ float buf[BLOCK];
  float acc = 0.f;
  for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n; i += (int64_t)gridDim.x * BLOCK) acc += x[i];
  buf[threadIdx.x] = acc;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, buf[0]);
}

at::Tensor sum_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == at::kFloat, "sum_forward: float32 CUDA input");
  at::Tensor total = at::zeros({}, x.options());
  constexpr int kBlock = 512;
  const int64_t n = x.numel();
  int blocks = static_cast<int>((n + kBlock - 1) / kBlock);
  blocks = blocks < 1024 ? (blocks > 0 ? blocks : 1) : 1024;
  sum_kernel<kBlock><<<blocks, kBlock, 0, static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x))>>>(
      x.data_ptr<float>(), total.data_ptr<float>(), n);
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "sum_forward: launch failed");
  return total;
}

REGISTER_BINDING(sum_forward, sum_forward);
