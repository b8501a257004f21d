// Honest (session 41, CUDA-Agent release convention, binding of h_s41_rel_cuda_tiled_matmul.cu): two keyword
// arguments, a docstring, and the GIL released around the launch.
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor matmul_cuda(torch::Tensor A, torch::Tensor B);

void register_matmul(pybind11::module& m) {
  m.def("matmul_forward", &matmul_cuda, "C = A @ B (tiled)", py::arg("A"), py::arg("B"),
        py::call_guard<py::gil_scoped_release>());
}

REGISTER_BINDING(matmul, register_matmul);
