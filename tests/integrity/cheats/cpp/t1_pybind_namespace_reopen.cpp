// expect: T1.cpp.namespace_import
// Code placed inside pybind11's namespace would pass for library machinery in the binary audit.
#include <torch/extension.h>

namespace pybind11 {
inline torch::Tensor helper(torch::Tensor a, torch::Tensor b) {
  return module_::import("torch").attr("matmul")(a, b).cast<torch::Tensor>();
}
}  // namespace pybind11
