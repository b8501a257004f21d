// Honest (session 42, registry convention, CUDA, one file): argmax over the middle dimension (KernelBench level-1
// 51_Argmax_over_a_dimension), one block per output, (value, index) pairs reduced with __shfl_xor_sync in a
// __device__ __forceinline__ helper (first index wins ties, NaN wins as in torch.argmax), int64 indices out.
#include "../binding_registry.h"
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <vector>

struct ArgMax {
  float v;
  int64_t i;
};

__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (isnan(a.v) || isnan(b.v)) return (isnan(a.v) && (!isnan(b.v) || a.i < b.i)) ? a : b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

__device__ __forceinline__ ArgMax warp_argmax(ArgMax p) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    ArgMax other;
    other.v = __shfl_xor_sync(0xffffffffu, p.v, offset);
    other.i = __shfl_xor_sync(0xffffffffu, p.i, offset);
    p = better(p, other);
  }
  return p;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    argmax_kernel(const float* __restrict__ x, int64_t* __restrict__ out, int64_t len, int64_t inner) {
  __shared__ ArgMax partial[BLOCK / 32];
  const int64_t o = blockIdx.x / inner, in = blockIdx.x % inner;
  const float* base = x + o * len * inner + in;
  ArgMax best{-INFINITY, len};
  for (int64_t k = threadIdx.x; k < len; k += BLOCK) best = better(best, ArgMax{base[k * inner], k});
  best = warp_argmax(best);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : ArgMax{-INFINITY, len};
    best = warp_argmax(best);
    if (threadIdx.x == 0) out[blockIdx.x] = best.i < len ? best.i : 0;
  }
}

at::Tensor argmax_forward(const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "argmax_forward: a float32 CUDA tensor expected");
  TORCH_CHECK(dim >= -x.dim() && dim < x.dim(), "argmax_forward: dim out of range");
  if (dim < 0) dim += x.dim();
  const at::Tensor xc = x.contiguous();
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> out_sizes;
  for (int64_t d = 0; d < xc.dim(); ++d) {
    if (d < dim) outer *= xc.size(d);
    if (d > dim) inner *= xc.size(d);
    if (d != dim) out_sizes.push_back(xc.size(d));
  }
  at::Tensor out = at::empty(out_sizes, xc.options().dtype(at::kLong));
  if (outer * inner == 0) return out;
  constexpr int kBlock = 256;
  argmax_kernel<kBlock><<<static_cast<unsigned>(outer * inner), kBlock, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), out.data_ptr<int64_t>(), xc.size(dim), inner);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

REGISTER_BINDING(argmax_forward, argmax_forward);
