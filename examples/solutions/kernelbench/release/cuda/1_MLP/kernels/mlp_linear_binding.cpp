// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"

cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in, int64_t out, float scale, float slope, cudaStream_t stream);

torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale, double slope) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "linear_act_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(w.is_contiguous() && w.scalar_type() == at::kFloat, "linear_act_forward: w must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "linear_act_forward: b must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "linear_act_forward: x must be a CUDA tensor");
  TORCH_CHECK(w.is_cuda(), "linear_act_forward: w must be a CUDA tensor");
  TORCH_CHECK(b.is_cuda(), "linear_act_forward: b must be a CUDA tensor");
  auto out = torch::empty({x.size(0), w.size(0)}, x.options());
  const float* x_p = x.const_data_ptr<float>();
  const float* w_p = w.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = linear_act_launch(x_p, w_p, b_p, out_p, x.size(0), x.size(1), w.size(0), (float)scale, (float)slope, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "linear_act_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

void register_mlp_linear(pybind11::module& m) {
  m.def("linear_act_forward", &linear_act_forward, "linear_act_forward (1_MLP)");
}

REGISTER_BINDING(mlp_linear, register_mlp_linear);
