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
