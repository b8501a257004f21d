// Honest (session 42, CUDA-Agent release convention, binding of h_s42_rel_cuda_rmsnorm_blocks.cu).
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor rms_norm_forward(const torch::Tensor& x, double eps);

void register_rms_norm(pybind11::module& m) {
  m.doc() = "RMSNorm over dim 1 (CUDA)";
  m.def("rms_norm_forward", &rms_norm_forward, py::arg("x"), py::arg("eps") = 1e-5);
}

REGISTER_BINDING(rms_norm, register_rms_norm);
