// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = relu_launch(x_p, out_p, x.numel(), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "relu_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

void register_relu(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, "relu_forward (19_ReLU)");
}

REGISTER_BINDING(relu, register_relu);
