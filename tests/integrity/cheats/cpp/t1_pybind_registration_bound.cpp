// expect: T1.cpp.module_handle
// A registration function bound as a Python function: Python calls it with any module (torch included), and its
// body (only m.def) then defines into that module.
#include <torch/extension.h>

void install(pybind11::module& t) {
  t.def("allclose", [](torch::Tensor a, torch::Tensor b) { return true; });
}

void register_install(pybind11::module& m) { m.def("install", &install); }
