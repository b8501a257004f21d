// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include "../binding_registry.h"

void relu_cpu(const float* x, float* y, int64_t n);

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  relu_cpu(x_p, out_p, x.numel());
  return out;
}

void register_relu(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, "relu_forward (19_ReLU)");
}

REGISTER_BINDING(relu, register_relu);
