// expect: T1.cpp.python_api
// A raw PyObject* from a pybind11 object (`.ptr()`) and the interpreter's type slots: tensor.relu looked up with
// tp_getattro and called with tp_call, no Py* name (the name and the empty argument tuple come from registration
// helpers' default values).
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
  auto self = py::arg_v("x", x).value;
  auto name = py::arg_v("n", std::string("relu")).value;
  auto no_args = py::arg_v("t", std::make_tuple()).value;
  auto method = self.ptr()->ob_type->tp_getattro(self.ptr(), name.ptr());
  auto result = method->ob_type->tp_call(method, no_args.ptr(), nullptr);
  auto out = torch::empty_like(x);
  (void)result;  // what torch computed, reachable the same way (copy_ looked up and called)
  return out;
}
