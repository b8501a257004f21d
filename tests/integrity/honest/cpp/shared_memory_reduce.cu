// Block reduction with shared memory, warp shuffles, a templated dtype, launch checks and
// the current stream (using the stream we are given is honest; creating one is not).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

namespace {
constexpr int kThreads = 256;
__constant__ float c_scale[1];
__device__ int d_blocks_done;

template <typename scalar_t>
__device__ __forceinline__ scalar_t warp_sum(scalar_t v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}
}  // namespace

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) row_sum_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                                                            int64_t cols) {
  __shared__ scalar_t partial[kThreads / 32];
  const int64_t row = blockIdx.x;
  scalar_t acc = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += x[row * cols + c];
  acc = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : scalar_t(0);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) out[row] = acc * c_scale[0];
  }
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
}

void row_sum_launch(const at::Tensor& x, const at::Tensor& out) {
  const at::cuda::OptionalCUDAGuard guard(x.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto stream2 = c10::cuda::getCurrentCUDAStream(x.get_device());
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const float one = 1.0f;
  cudaMemcpyToSymbolAsync(c_scale, &one, sizeof(float), 0, cudaMemcpyHostToDevice, stream);
  cudaFuncSetAttribute(row_sum_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "row_sum", [&] {
    row_sum_kernel<scalar_t><<<x.size(0), kThreads, 0, stream>>>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                                                 x.size(1));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "row_sum launch failed: ", cudaGetErrorString(err), " on ", sms, " SMs");
  (void)stream2;
}
