// Honest (session 42, CUDA-Agent release convention, binding of h_s42_rel_cuda_conv2d_direct.cu): the kernel file's
// function declared over three lines with default arguments (`int64_t stride = 1, int64_t padding = 0, ...);`), and
// registered with the same defaults as keyword arguments.
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor conv2d_forward(const torch::Tensor& x, const torch::Tensor& weight,
                             const c10::optional<torch::Tensor>& bias = c10::nullopt,
                             int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1);

void register_conv2d(pybind11::module& m) {
  m.def("conv2d_forward", &conv2d_forward, "direct 2-D convolution (CUDA)", py::arg("x"), py::arg("weight"),
        py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1);
}

REGISTER_BINDING(conv2d, register_conv2d);
