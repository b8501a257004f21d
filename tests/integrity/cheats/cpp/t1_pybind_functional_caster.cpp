// expect: T1.cpp.python_api
// std::function arguments are converted from any Python callable (torch.matmul) by pybind11/functional.h.
#include <torch/extension.h>
#include <pybind11/functional.h>

#include <functional>

torch::Tensor apply(std::function<torch::Tensor(torch::Tensor, torch::Tensor)> f, torch::Tensor a, torch::Tensor b) {
  return f(a, b);
}
