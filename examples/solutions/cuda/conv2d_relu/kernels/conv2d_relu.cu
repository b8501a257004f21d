// Direct 2-D convolution (stride 1, zero padding) + bias + ReLU, NCHW, fp32.
// One thread per output element; consecutive threads walk the output row, so
// input reads coalesce and the weights of one output channel stay in cache.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void conv2d_relu_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                                   float* __restrict__ y, int64_t n, int64_t c, int64_t h, int64_t wd, int64_t oc, int kh,
                                   int kw, int pad, int64_t oh, int64_t ow) {
  const int64_t total = n * oc * oh * ow;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = idx % ow;
    const int64_t i = (idx / ow) % oh;
    const int64_t o = (idx / (ow * oh)) % oc;
    const int64_t b = idx / (ow * oh * oc);
    float acc = __ldg(bias + o);
    for (int64_t ci = 0; ci < c; ++ci) {
      const float* xp = x + (b * c + ci) * h * wd;
      const float* wp = w + (o * c + ci) * kh * kw;
      for (int u = 0; u < kh; ++u) {
        const int64_t yi = i + u - pad;
        if (yi < 0 || yi >= h) continue;
        for (int v = 0; v < kw; ++v) {
          const int64_t xj = j + v - pad;
          if (xj < 0 || xj >= wd) continue;
          acc = fmaf(__ldg(xp + yi * wd + xj), __ldg(wp + u * kw + v), acc);
        }
      }
    }
    y[idx] = fmaxf(acc, 0.0f);
  }
}

cudaError_t conv2d_relu_launch(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, int64_t h,
                               int64_t wd, int64_t oc, int64_t kh, int64_t kw, int64_t pad, cudaStream_t stream) {
  const int64_t oh = h + 2 * pad - kh + 1, ow = wd + 2 * pad - kw + 1;
  const int64_t total = n * oc * oh * ow;
  if (total <= 0) return cudaSuccess;
  const int threads = 256;
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > 132 * 64) blocks = 132 * 64;
  conv2d_relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, w, bias, y, n, c, h, wd, oc, (int)kh, (int)kw, (int)pad, oh, ow);
  return cudaGetLastError();
}
