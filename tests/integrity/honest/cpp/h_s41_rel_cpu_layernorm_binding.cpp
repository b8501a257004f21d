// Honest (session 41, CUDA-Agent release convention, CPU): LayerNorm over the last dimension with at::parallel_for,
// optional affine parameters (c10::optional / py::none() defaults), torch::empty({...}, x.options()).
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor layer_norm_forward(torch::Tensor x, c10::optional<torch::Tensor> weight,
                                 c10::optional<torch::Tensor> bias, double eps) {
  x = x.contiguous();
  const int64_t cols = x.size(-1);
  const int64_t rows = x.numel() / cols;
  auto y = torch::empty(x.sizes(), x.options());
  const float* w = weight.has_value() ? weight->data_ptr<float>() : nullptr;
  const float* b = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = xp + r * cols;
      float* out = yp + r * cols;
      double mean = 0.0;
      for (int64_t c = 0; c < cols; ++c) mean += in[c];
      mean /= cols;
      double var = 0.0;
      for (int64_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
      const double rstd = 1.0 / std::sqrt(var / cols + eps);
      for (int64_t c = 0; c < cols; ++c) {
        float v = static_cast<float>((in[c] - mean) * rstd);
        if (w) v *= w[c];
        if (b) v += b[c];
        out[c] = v;
      }
    }
  });
  return y;
}

void register_layer_norm(pybind11::module& m) {
  m.def("layer_norm_forward", &layer_norm_forward, "LayerNorm (last dim)", py::arg("x"),
        py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
}

REGISTER_BINDING(layer_norm, register_layer_norm);
