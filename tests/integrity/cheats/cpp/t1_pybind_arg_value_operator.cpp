// expect: T1.cpp.python_api
// py::arg_v's default value is a Python object made from a C++ one: two tensors made Python objects and multiplied
// with pybind11's object operators run Tensor.__mul__ (torch's mul) from C++ with no Py* name, import or .attr.
#include <torch/extension.h>

torch::Tensor mul_forward(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  auto product = py::arg_v("a", a).value * py::arg_v("b", b).value;
  out.copy_(product.cast<torch::Tensor>());
  return out;
}
