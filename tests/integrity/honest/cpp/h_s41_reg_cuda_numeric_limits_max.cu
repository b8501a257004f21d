// Honest (session 41, registry convention, CUDA, one file): a row max templated on the element type, seeded with
// at::numeric_limits<scalar_t>::lower_bound(), with a multi-line helper macro that declares the thread's indices
// (its continuation lines were "globals" to T12.cpp.static_cache before session 41).
#include "../binding_registry.h"
#include <ATen/Dispatch.h>
#include <ATen/cuda/NumericLimits.cuh>
#include <ATen/ops/empty.h>
#include <cuda_runtime.h>

#define ROW_PROLOGUE(cols)                        \
  const int64_t row = blockIdx.x;                 \
  int64_t col = threadIdx.x;                      \
  const int64_t row_offset = row * (cols);

template <typename scalar_t>
__global__ void row_max_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t cols) {
  __shared__ float best[256];
  ROW_PROLOGUE(cols)
  float m = static_cast<float>(at::numeric_limits<scalar_t>::lower_bound());
  for (; col < cols; col += blockDim.x) m = fmaxf(m, static_cast<float>(x[row_offset + col]));
  best[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) best[threadIdx.x] = fmaxf(best[threadIdx.x], best[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) y[row] = static_cast<scalar_t>(best[0]);
}

at::Tensor row_max(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous(), "row_max: contiguous 2-D CUDA tensor expected");
  at::Tensor y = at::empty({x.size(0)}, x.options());
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "row_max", [&] {
    row_max_kernel<scalar_t><<<static_cast<unsigned>(x.size(0)), 256, 0, stream>>>(x.data_ptr<scalar_t>(),
                                                                                    y.data_ptr<scalar_t>(), x.size(1));
  });
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "row_max: launch failed");
  return y;
}

REGISTER_BINDING(row_max, row_max);
