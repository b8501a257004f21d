// expect: T1.cpp.module_handle
// Session 41 accepts REGISTER_BINDING_DOC(name, fn, "doc") and REGISTER_BINDING(name, &fn) for a registration; the
// same registration bound with m.def (callable from Python with any module) is still refused.
#include <torch/extension.h>

#include "../binding_registry.h"

torch::Tensor relu(torch::Tensor x) { return torch::empty_like(x); }

void register_relu(pybind11::module& m) {
  m.def("relu", &relu);
  m.def("install", &register_relu);
}

REGISTER_BINDING_DOC(relu, &register_relu, "relu");
