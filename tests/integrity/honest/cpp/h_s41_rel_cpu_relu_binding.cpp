// Honest (session 41, CUDA-Agent release convention, CPU): torch/extension.h, `namespace py = pybind11;`, a keyword
// argument, a module docstring, and a lambda wrapper registered beside the function.
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "relu_forward: CPU tensor expected");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
  return out;
}

void register_relu(pybind11::module& m) {
  m.doc() = "ReLU kernels (CPU, OpenMP)";
  m.def("relu_forward", &relu_forward, "elementwise max(x, 0)", py::arg("x"));
  m.def("relu_inplace_free", [](const torch::Tensor& x) { return relu_forward(x); }, py::arg("x"));
}

REGISTER_BINDING(relu, register_relu);
