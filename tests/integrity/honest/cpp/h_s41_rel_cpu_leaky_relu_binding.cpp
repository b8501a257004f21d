// Honest (session 41, CUDA-Agent release convention, CPU): a default argument value (py::arg("slope") = 0.01), a
// typed dtype check with torch::kFloat32, .scalar_type() and .options().dtype().
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor leaky_relu_forward(const torch::Tensor& x, double negative_slope) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "leaky_relu_forward: expected float32, got ", x.scalar_type());
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty(xc.sizes(), xc.options().dtype(torch::kFloat32));
  const float slope = static_cast<float>(negative_slope);
  const float* in = xc.data_ptr<float>();
  float* out = y.data_ptr<float>();
#pragma omp parallel for simd
  for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] >= 0.f ? in[i] : slope * in[i];
  return y;
}

void register_leaky_relu(pybind11::module_& m) {
  m.def("leaky_relu_forward", &leaky_relu_forward, "LeakyReLU", py::arg("x"), py::arg("negative_slope") = 0.01);
}

REGISTER_BINDING(leaky_relu, register_leaky_relu);
