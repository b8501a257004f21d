// expect: T1.cpp.python_api
// A Python callable taken as an argument and called from C++ (py::args, no .attr needed).
#include <torch/extension.h>

void register_call(pybind11::module& m) {
  m.def("call", [](py::args a) { return a[0](a[1], a[2]); });
}
