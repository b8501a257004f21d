// expect: T1.cpp.python_api
// getattr found by argument-dependent lookup: no py:: prefix to see.
#include <torch/extension.h>

void register_mm(pybind11::module& m) {
  auto torch_mod = getattr(m, "__builtins__");
  m.def("mm", [torch_mod](torch::Tensor a) { return a; });
}
