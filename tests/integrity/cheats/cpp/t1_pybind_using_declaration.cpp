// expect: T1.cpp.python_api
// A using-declaration hides the pybind11 name the call goes through.
#include <torch/extension.h>
using pybind11::module_;

torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
  auto torch_mod = module_::import("torch");
  return a;
}
