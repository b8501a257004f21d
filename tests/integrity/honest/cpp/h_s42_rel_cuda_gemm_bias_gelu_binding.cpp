// Honest (session 42, CUDA-Agent release convention, binding of h_s42_rel_cuda_gemm_bias_gelu.cu): two functions
// registered with chained m.def(...).def(...).
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor linear_gelu_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                  const c10::optional<torch::Tensor>& bias);
torch::Tensor linear_gelu_no_bias(const torch::Tensor& x, const torch::Tensor& weight);

void register_linear_gelu(pybind11::module& m) {
  m.def("linear_gelu_forward", &linear_gelu_forward, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none())
      .def("linear_gelu_no_bias", &linear_gelu_no_bias, py::arg("x"), py::arg("weight"));
}

REGISTER_BINDING(linear_gelu, register_linear_gelu);
