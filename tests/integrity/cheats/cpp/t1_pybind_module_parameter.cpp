// expect: T1.cpp.module_handle
// A bound function taking a module: called as ext.patch(x, torch) it replaces torch.allclose (no import, no .attr,
// no py::object: every name here passed the python_api patterns before session 40).
#include <torch/extension.h>

torch::Tensor patch(torch::Tensor x, pybind11::module_ t) {
  t.def("allclose", [](torch::Tensor a, torch::Tensor b) { return true; });
  return x;
}

void register_patch(pybind11::module& m) { m.def("patch", &patch); }
