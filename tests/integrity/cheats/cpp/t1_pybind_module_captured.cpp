// expect: T1.cpp.module_handle
// The registration's module captured by a bound lambda: after the first (verified) call, `relu` is redefined to an
// identity the timed calls then run (T13 through the module handle).
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) { return torch::empty_like(x); }

void register_relu(pybind11::module& m) {
  m.def("relu", [&](torch::Tensor x) {
    m.def("relu", [](torch::Tensor y) { return y; });
    return relu(x);
  });
}
