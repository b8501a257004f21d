"""Honest: a KernelBench single file that registers its function itself (PYBIND11_MODULE, m.def, m.doc()) instead of
load_inline's `functions=` (session 40: the module of PYBIND11_MODULE is a registration's module)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "x must be contiguous float32");
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "relu";
  m.def("relu_forward", &relu_forward, "relu (CPU)");
}
"""

relu_ext = load_inline(name="relu_pybind11_module", cpp_sources=cpp_source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
