// Honest (session 41, CUDA-Agent release convention, CUDA, one file): LayerNorm as two kernels (row statistics, then
// normalize) driven by a host launcher struct; mean and rstd returned beside the output as std::vector<torch::Tensor>.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "../binding_registry.h"

namespace py = pybind11;

__global__ void row_stats_kernel(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd,
                                 int cols, float eps) {
  extern __shared__ float smem[];
  float* s_sum = smem;
  float* s_sq = smem + blockDim.x;
  const float* in = x + (size_t)blockIdx.x * cols;
  float s = 0.f, sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = in[c];
    s += v;
    sq += v * v;
  }
  s_sum[threadIdx.x] = s;
  s_sq[threadIdx.x] = sq;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      s_sum[threadIdx.x] += s_sum[threadIdx.x + stride];
      s_sq[threadIdx.x] += s_sq[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float mu = s_sum[0] / cols;
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rsqrtf(s_sq[0] / cols - mu * mu + eps);
  }
}

__global__ void normalize_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                 const float* __restrict__ rstd, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int rows, int cols) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= (int64_t)rows * cols) return;
  const int r = i / cols, c = i % cols;
  y[i] = (x[i] - mean[r]) * rstd[r] * gamma[c] + beta[c];
}

struct LayerNormLauncher {
  int rows, cols;
  float eps;
  cudaStream_t stream;

  void operator()(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd) const {
    const int threads = 256;
    row_stats_kernel<<<rows, threads, 2 * threads * sizeof(float), stream>>>(x, mean, rstd, cols, eps);
    const int64_t total = (int64_t)rows * cols;
    normalize_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(x, mean, rstd, gamma, beta,
                                                                                          y, rows, cols);
  }
};

std::vector<torch::Tensor> layer_norm_fwd(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
  const c10::cuda::CUDAGuard guard(x.device());
  x = x.contiguous();
  const int cols = static_cast<int>(x.size(-1));
  const int rows = static_cast<int>(x.numel() / cols);
  auto y = torch::empty_like(x);
  auto mean = torch::empty({rows}, x.options());
  auto rstd = torch::empty({rows}, x.options());
  LayerNormLauncher launch{rows, cols, static_cast<float>(eps), at::cuda::getCurrentCUDAStream().stream()};
  launch(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(),
         mean.data_ptr<float>(), rstd.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, mean, rstd};
}

void register_layer_norm(pybind11::module& m) {
  m.def("layer_norm_forward", &layer_norm_fwd, "LayerNorm returning (y, mean, rstd)", py::arg("x"), py::arg("gamma"),
        py::arg("beta"), py::arg("eps") = 1e-5);
}

REGISTER_BINDING(layer_norm, register_layer_norm);
