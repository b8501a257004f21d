// Honest (session 42, registry convention, CPU): a 1-D convolution (KernelBench level-1 "standard 1D convolution")
// taking stride/padding/dilation as std::vector<int64_t> arguments, loops over c10::irange, the output zeroed with
// at::zeros and the optional bias added last.
#include "../binding_registry.h"
#include <ATen/ops/zeros.h>
#include <c10/util/irange.h>

#include <cstdint>
#include <optional>
#include <vector>

at::Tensor conv1d_forward(const at::Tensor& x, const at::Tensor& weight, std::optional<at::Tensor> bias,
                          std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3, "conv1d_forward: x is (N, C, L) and weight (O, C, K)");
  TORCH_CHECK(stride.size() == 1 && padding.size() == 1 && dilation.size() == 1,
              "conv1d_forward: stride, padding and dilation take one value each");
  const int64_t s = stride[0], p = padding[0], d = dilation[0];
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const int64_t n = xc.size(0), c_in = xc.size(1), len = xc.size(2);
  const int64_t c_out = wc.size(0), k = wc.size(2);
  TORCH_CHECK(wc.size(1) == c_in, "conv1d_forward: channel mismatch");
  const int64_t out_len = (len + 2 * p - d * (k - 1) - 1) / s + 1;
  TORCH_CHECK(out_len > 0, "conv1d_forward: empty output");
  at::Tensor y = at::zeros({n, c_out, out_len}, xc.options());
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < c_out; ++o) {
      float* yrow = yp + (b * c_out + o) * out_len;
      for (const auto ci : c10::irange(c_in)) {
        const float* xrow = xp + (b * c_in + ci) * len;
        const float* wrow = wp + (o * c_in + ci) * k;
        for (const auto t : c10::irange(out_len)) {
          float acc = 0.f;
          for (const auto j : c10::irange(k)) {
            const int64_t pos = t * s - p + j * d;
            if (pos >= 0 && pos < len) acc += xrow[pos] * wrow[j];
          }
          yrow[t] += acc;
        }
      }
    }
  }
  if (bias.has_value() && bias->defined()) {
    const at::Tensor bc = bias->contiguous();
    const float* bp = bc.data_ptr<float>();
    for (const auto b : c10::irange(n))
      for (const auto o : c10::irange(c_out))
        for (const auto t : c10::irange(out_len)) yp[(b * c_out + o) * out_len + t] += bp[o];
  }
  return y;
}

REGISTER_BINDING(conv1d_forward, conv1d_forward);
