// expect: T1.cpp.module_handle
// A bound function taking a module: given one it defines into it, and `t.def("allclose", ...)` replaces a function
// that is not pybind11's own (torch.allclose, were torch handed in: the Python allowlist refuses passing torch, not
// the extension module itself). No import, no .attr, no py::object: every name here passed before session 40.
#include <torch/extension.h>

torch::Tensor patch(torch::Tensor x, pybind11::module_ t) {
  t.def("allclose", [](torch::Tensor a, torch::Tensor b) { return true; });
  return x;
}

void register_patch(pybind11::module& m) { m.def("patch", &patch); }
