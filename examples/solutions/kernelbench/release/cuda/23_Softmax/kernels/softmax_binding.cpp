// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = softmax_launch(x_p, out_p, x.size(0), x.size(1), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "softmax_forward (23_Softmax)");
}

REGISTER_BINDING(softmax, register_softmax);
