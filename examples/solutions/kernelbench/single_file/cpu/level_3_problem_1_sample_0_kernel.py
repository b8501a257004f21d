"""KernelBench level 3 problem 1 (1_MLP): an honest CPU kernel built with load_inline."""
import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

#include <cstdint>

void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                    int64_t out, float scale, float slope) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const float* xr = x + r * in;
      const float* wo = w + o * in;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * wo[i];
      float v = (static_cast<float>(acc) + bias[o]) * scale;
      y[r * out + o] = v > 0.0f ? v : slope * v;
    }
  }
}

torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale, double slope) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "linear_act_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(w.is_contiguous() && w.scalar_type() == at::kFloat, "linear_act_forward: w must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "linear_act_forward: b must be a contiguous float32 tensor");
  auto out = torch::empty({x.size(0), w.size(0)}, x.options());
  const float* x_p = x.const_data_ptr<float>();
  const float* w_p = w.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  linear_act_cpu(x_p, w_p, b_p, out_p, x.size(0), x.size(1), w.size(0), (float)scale, (float)slope);
  return out;
}
"""

ext = load_inline(
    name="kb_l3_p1_cpu",
    cpp_sources=cpp_source,
    functions=["linear_act_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        # network = [Linear, ReLU] * hidden layers + [Linear]: a fused linear+ReLU per hidden layer.
        n = len(self.network)
        for i in range(0, n, 2):
            layer = self.network[i]
            slope = 0.0 if i + 1 < n else 1.0
            x = ext.linear_act_forward(x, layer.weight, layer.bias, 1.0, slope)
        return x
