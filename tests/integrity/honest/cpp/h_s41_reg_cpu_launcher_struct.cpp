// Honest (session 41, registry convention, CPU): a linear layer with an optional bias through a launcher struct,
// std::optional<at::Tensor>, .has_value()/.value(), shape vectors from x.sizes().vec().
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

#include <optional>
#include <vector>

struct LinearLauncher {
  const float* x;
  const float* w;
  const float* bias;  // may be null
  float* y;
  int64_t rows, in_features, out_features;

  void run() const {
#pragma omp parallel for collapse(2)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out_features; ++o) {
        float acc = bias ? bias[o] : 0.0f;
        const float* xr = x + r * in_features;
        const float* wr = w + o * in_features;
        for (int64_t i = 0; i < in_features; ++i) acc += xr[i] * wr[i];
        y[r * out_features + o] = acc;
      }
    }
  }
};

at::Tensor linear_forward(const at::Tensor& x, const at::Tensor& weight, std::optional<at::Tensor> bias) {
  TORCH_CHECK(x.size(-1) == weight.size(1), "linear_forward: in_features mismatch");
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.contiguous();
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = weight.size(0);
  at::Tensor y = at::empty(out_shape, x.options());
  at::Tensor bc;
  if (bias.has_value()) bc = bias.value().contiguous();
  LinearLauncher launch{xc.data_ptr<float>(), wc.data_ptr<float>(), bc.defined() ? bc.data_ptr<float>() : nullptr,
                        y.data_ptr<float>(), xc.numel() / x.size(-1), x.size(-1), weight.size(0)};
  launch.run();
  return y;
}

REGISTER_BINDING(linear_forward, linear_forward);
