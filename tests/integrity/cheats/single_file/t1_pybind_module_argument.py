# expect: T1.cpp.module_handle
# The extension hands itself to its own function (`ext.relu_forward(x, ext)` passes the Python allowlist): the C++
# side holds a module handle at call time and defines into it (a second overload here).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x, pybind11::module_ self) {
  self.def("relu_forward", [](torch::Tensor y, pybind11::module_) { return y; });
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
  return out;
}
"""

ext = load_inline(name="relu_self_module", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x, ext)
