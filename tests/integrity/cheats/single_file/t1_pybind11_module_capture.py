# expect: T1.cpp.module_handle
# PYBIND11_MODULE's own module captured by the bound lambda: a module handle alive at call time, defining into the
# module on each call (built with load_inline: the same-name def chains behind the first, so relu still runs).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>

torch::Tensor relu_ref(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("relu_forward", [m](torch::Tensor x) mutable {
    m.def("relu_forward", [](torch::Tensor y) { return y; });
    return relu_ref(x);
  });
}
"""

ext = load_inline(name="relu_capture", cpp_sources=cpp_source)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
