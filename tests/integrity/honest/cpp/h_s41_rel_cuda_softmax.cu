// Honest (session 41, CUDA-Agent release convention, CUDA kernel file): row softmax with cub::BlockReduce in a
// templated kernel, c10::cuda::CUDAGuard, at::cuda::getCurrentCUDAStream() and C10_CUDA_KERNEL_LAUNCH_CHECK().
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cub/block/block_reduce.cuh>

#include <cfloat>

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int BLOCK>
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  using BlockReduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float s_max, s_sum;
  const float* in = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, in[c]);
  const float block_max = BlockReduce(temp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) s_max = block_max;
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += expf(in[c] - s_max);
  const float block_sum = BlockReduce(temp).Sum(s);
  if (threadIdx.x == 0) s_sum = block_sum;
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = expf(in[c] - s_max) / s_sum;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "softmax_cuda: x must be a CUDA tensor");
  TORCH_CHECK(x.dim() == 2, "softmax_cuda: x must be 2-D");
  const c10::cuda::CUDAGuard device_guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  constexpr int kBlock = 256;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  softmax_kernel<kBlock><<<xc.size(0), kBlock, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(),
                                                            static_cast<int>(xc.size(1)));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
