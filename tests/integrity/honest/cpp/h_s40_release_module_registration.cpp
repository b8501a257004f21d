// Honest (session 40): what a release-style registration may do with its module: m.def (chained too), a docstring,
// attribute sets of plain values, and calling another registration function with it.
#include <torch/extension.h>

namespace py = pybind11;

void register_helpers(pybind11::module& m);

torch::Tensor scale(torch::Tensor x, double a) {
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto y = torch::empty_like(x);
  const float* xp = x.const_data_ptr<float>();
  float* yp = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = static_cast<float>(a) * xp[i];
  return y;
}

void register_scale(pybind11::module_& m) {
  m.doc() = "scale kernels";
  m.attr("KERNEL_VERSION") = 2;
  m.def("scale", &scale, "y = a * x", py::arg("x"), py::arg("a") = 1.0)
      .def("scale_lambda", [](torch::Tensor x) { return scale(x, 2.0); });
  register_helpers(m);
}

void register_helpers(pybind11::module& m) { m.def("scale_twice", [](torch::Tensor x) { return scale(x, 2.0); }); }

REGISTER_BINDING(scale, register_scale);
