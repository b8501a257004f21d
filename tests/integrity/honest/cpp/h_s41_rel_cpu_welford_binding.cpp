// Honest (session 41, CUDA-Agent release convention, CPU): LayerNorm statistics with a Welford accumulator struct
// whose methods are named add/mean (T1.cpp.aten_method before session 41), registered with REGISTER_BINDING_DOC and
// `&register_x` (T1.cpp.module_handle before session 41).
#include <torch/extension.h>

#include <cmath>

#include "../binding_registry.h"

namespace py = pybind11;

struct Welford {
  double m = 0.0, m2 = 0.0;
  int64_t n = 0;
  void add(double v) {
    ++n;
    const double d = v - m;
    m += d / n;
    m2 += d * (v - m);
  }
  double mean() const { return m; }
  double var() const { return n > 0 ? m2 / n : 0.0; }
};

torch::Tensor layer_norm_rows(torch::Tensor x, double eps) {
  x = x.contiguous();
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto y = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    Welford w;
    for (int64_t c = 0; c < cols; ++c) w.add(in[r * cols + c]);
    const double mu = w.mean(), rstd = 1.0 / std::sqrt(w.var() + eps);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>((in[r * cols + c] - mu) * rstd);
  }
  return y;
}

void register_layer_norm_rows(pybind11::module& m) {
  m.def("layer_norm_rows", &layer_norm_rows, py::arg("x"), py::arg("eps") = 1e-5);
}

REGISTER_BINDING_DOC(layer_norm_rows, &register_layer_norm_rows, "LayerNorm over the last dimension (Welford)");
