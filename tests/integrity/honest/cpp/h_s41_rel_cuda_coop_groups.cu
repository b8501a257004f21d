// Honest (session 41, CUDA-Agent release convention, CUDA kernel file): mean over rows with cooperative groups
// (thread_block, tiled_partition<32>, cg::reduce) and __shfl_down_sync in a device helper.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__device__ __forceinline__ float shfl_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}

__global__ void row_mean_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ float warp_sums[32];
  const float* in = x + (size_t)blockIdx.x * cols;
  float acc = 0.f;
  for (int c = block.thread_rank(); c < cols; c += block.size()) acc += in[c];
  acc = cg::reduce(warp, acc, cg::plus<float>());
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = acc;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    float v = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.f;
    v = shfl_sum(v);
    if (warp.thread_rank() == 0) y[blockIdx.x] = v / cols;
  }
}

torch::Tensor row_mean_cuda(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.dim() == 2, "row_mean_cuda: contiguous 2-D CUDA tensor expected");
  auto y = torch::empty({x.size(0), 1}, x.options());
  row_mean_kernel<<<x.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                           static_cast<int>(x.size(1)));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
