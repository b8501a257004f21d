// expect: T1.cpp.python_api
// Session 37's red team: a c10::SymInt argument whose guard_int calls back into its Python node (torch compute).
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x, c10::SymInt k) {
  auto n = k.guard_int(__FILE__, __LINE__);
  (void)n;
  return torch::empty_like(x);
}
