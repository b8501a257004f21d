// expect: T1.cpp.python_api
// The module object given to the register function imports torch (a static member called through it).
#include <torch/extension.h>

void register_mm(pybind11::module& m) {
  auto t = m.import("torch");
  m.def("mm", [t](torch::Tensor a, torch::Tensor b) { return a; });
}
