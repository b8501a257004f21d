// CUDA-Agent release style: torch/extension.h and a pybind11 register function.
#include <torch/extension.h>
#include "../binding_registry.h"

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols);

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  auto out = torch::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  softmax_cpu(x_p, out_p, x.size(0), x.size(1));
  return out;
}

void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "softmax_forward (23_Softmax)");
}

REGISTER_BINDING(softmax, register_softmax);
