// Honest (session 41, registry convention, CUDA kernel file): a 1-D convolution whose filter taps live in
// __constant__ memory, copied with cudaMemcpyToSymbolAsync on the launch stream each call.
#include <cuda_runtime.h>

#include <cstdint>

#define MAX_TAPS 64

__constant__ float c_taps[MAX_TAPS];

__global__ void conv1d_const(const float* __restrict__ x, float* __restrict__ y, int64_t n, int taps) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t out_n = n - taps + 1;
  if (i >= out_n) return;
  float acc = 0.f;
#pragma unroll 8
  for (int t = 0; t < taps; ++t) acc += c_taps[t] * x[i + t];
  y[i] = acc;
}

cudaError_t conv1d_launch(const float* x, const float* taps_host_or_device, float* y, int64_t n, int taps,
                          cudaStream_t stream) {
  if (taps > MAX_TAPS) return cudaErrorInvalidValue;
  cudaError_t err = cudaMemcpyToSymbolAsync(c_taps, taps_host_or_device, taps * sizeof(float), 0,
                                            cudaMemcpyDeviceToDevice, stream);
  if (err != cudaSuccess) return err;
  const int threads = 256;
  const int64_t out_n = n - taps + 1;
  conv1d_const<<<static_cast<unsigned>((out_n + threads - 1) / threads), threads, 0, stream>>>(x, y, n, taps);
  return cudaGetLastError();
}
