// Honest (session 42, registry convention, CPU): KernelBench level-2 12_Gemm_Multiply_LeakyReLU as one fused pass,
// y = leaky_relu((x @ W^T + b) * multiplier), rows split with at::parallel_for, dot products accumulated in double,
// arguments checked with ATen's TensorUtils helpers (at::TensorArg, at::checkDim, at::checkSize, at::checkAllSameType).
#include "../binding_registry.h"
#include <ATen/Parallel.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t kRowsPerTask = 4;

inline float leaky(float v, float slope) { return v >= 0.f ? v : v * slope; }

void gemm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
               float* __restrict__ y, int64_t row_begin, int64_t row_end, int64_t in_f, int64_t out_f, float mult,
               float slope) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * in_f;
    float* yr = y + r * out_f;
    for (int64_t o = 0; o < out_f; ++o) {
      const float* wo = w + o * in_f;
      double acc = 0.0;
      for (int64_t k = 0; k < in_f; ++k) acc += static_cast<double>(xr[k]) * wo[k];
      yr[o] = leaky(static_cast<float>(acc + b[o]) * mult, slope);
    }
  }
}

}  // namespace

at::Tensor linear_act_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double multiplier,
                              double negative_slope) {
  at::TensorArg x_arg{x, "x", 1}, w_arg{weight, "weight", 2}, b_arg{bias, "bias", 3};
  at::checkDim("linear_act_forward", x_arg, 2);
  at::checkDim("linear_act_forward", w_arg, 2);
  at::checkSize("linear_act_forward", b_arg, {weight.size(0)});
  at::checkAllSameType("linear_act_forward", {x_arg, w_arg, b_arg});
  TORCH_CHECK(x.size(1) == weight.size(1), "linear_act_forward: in_features mismatch");
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  const int64_t batch = xc.size(0), in_f = xc.size(1), out_f = wc.size(0);
  at::Tensor y = at::empty({batch, out_f}, xc.options());
  const float* xp = xc.const_data_ptr<float>();
  const float* wp = wc.const_data_ptr<float>();
  const float* bp = bc.const_data_ptr<float>();
  float* yp = y.mutable_data_ptr<float>();
  const float mult = static_cast<float>(multiplier), slope = static_cast<float>(negative_slope);
  at::parallel_for(0, batch, kRowsPerTask, [&](int64_t begin, int64_t end) {
    gemm_rows(xp, wp, bp, yp, begin, std::min(end, batch), in_f, out_f, mult, slope);
  });
  return y;
}

REGISTER_BINDING(linear_act_forward, linear_act_forward);
