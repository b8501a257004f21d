// Honest (session 42, CUDA-Agent release convention, binding of h_s42_rel_cuda_batchnorm_stats.cu): a tuple-returning
// function with a keyword default for eps.
#include <torch/extension.h>

#include <tuple>

#include "../binding_registry.h"

namespace py = pybind11;

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> batch_norm_forward(const torch::Tensor& x,
                                                                           const torch::Tensor& weight,
                                                                           const torch::Tensor& bias, double eps);

void register_batch_norm(pybind11::module& m) {
  m.def("batch_norm_forward", &batch_norm_forward, "BatchNorm2d, training mode (CUDA): (y, mean, invstd)",
        py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps") = 1e-5);
}

REGISTER_BINDING(batch_norm, register_batch_norm);
