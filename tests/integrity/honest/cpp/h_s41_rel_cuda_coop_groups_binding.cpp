// Honest (session 41, CUDA-Agent release convention, binding of h_s41_rel_cuda_coop_groups.cu): py::arg keywords.
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor row_mean_cuda(const torch::Tensor& x);

void register_row_mean(pybind11::module& m) {
  m.def("row_mean", &row_mean_cuda, "mean over the last dimension, keepdim", py::arg("x"));
}

REGISTER_BINDING(row_mean, register_row_mean);
