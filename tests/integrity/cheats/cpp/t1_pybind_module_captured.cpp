// expect: T1.cpp.module_handle
// The registration's module captured by a bound lambda: a Python object alive at call time, defining into the
// module on every call (a same-name def chains an overload behind the first, so this one does not swap `relu`;
// through the handle, def_submodule, add_object or a raw PyObject reach further).
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) { return torch::empty_like(x); }

void register_relu(pybind11::module& m) {
  m.def("relu", [&](torch::Tensor x) {
    m.def("relu", [](torch::Tensor y) { return y; });
    return relu(x);
  });
}
