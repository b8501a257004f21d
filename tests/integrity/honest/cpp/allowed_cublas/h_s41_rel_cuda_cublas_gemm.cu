// Honest where the skill allows cuBLAS (session 41, CUDA-Agent release convention): a GEMM through
// at::cuda::getCurrentCUDABlasHandle() on the current stream, then a bias + ReLU epilogue kernel of its own.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

#include "../binding_registry.h"

__global__ void bias_relu(float* __restrict__ y, const float* __restrict__ bias, int rows, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = fmaxf(y[i] + bias[i % cols], 0.f);
}

torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  const at::cuda::OptionalCUDAGuard guard(x.device());
  x = x.contiguous();
  weight = weight.contiguous();
  const int rows = static_cast<int>(x.size(0)), in = static_cast<int>(x.size(1)), out = static_cast<int>(weight.size(0));
  auto y = torch::empty({rows, out}, x.options());
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  cublasSetStream(handle, at::cuda::getCurrentCUDAStream());
  const float alpha = 1.f, beta = 0.f;
  // y^T (out x rows) = W (out x in) * x^T (in x rows), column-major
  cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, weight.data_ptr<float>(), in,
              x.data_ptr<float>(), in, &beta, y.data_ptr<float>(), out);
  const int threads = 256;
  bias_relu<<<(rows * out + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), rows, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

void register_linear_relu(pybind11::module& m) {
  m.def("linear_relu_forward", &linear_relu_forward);
}

REGISTER_BINDING(linear_relu, register_linear_relu);
