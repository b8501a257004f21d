// Honest (session 42, CUDA-Agent release convention, CPU): KernelBench level-2 12_Gemm_Multiply_LeakyReLU as one fused
// loop nest: a c10::optional bias (py::arg("bias") = py::none()), arguments checked with at::checkDeviceType,
// at::checkSameType and at::checkAllContiguous, output columns blocked for the cache, float dot products in double.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/TensorUtils.h>

#include <algorithm>

#include "../binding_registry.h"

namespace py = pybind11;

namespace {
constexpr int64_t kColBlock = 64;
}  // namespace

torch::Tensor linear_act_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                 const c10::optional<torch::Tensor>& bias, double multiplier, double negative_slope) {
  at::checkDeviceType("linear_act_forward", {x, weight}, at::DeviceType::CPU);
  const torch::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const torch::Tensor bc = bias.has_value() ? bias->contiguous() : torch::zeros({wc.size(0)}, wc.options());
  at::TensorArg xa{xc, "x", 1}, wa{wc, "weight", 2}, ba{bc, "bias", 3};
  at::checkSameType("linear_act_forward", xa, wa);
  at::checkAllContiguous("linear_act_forward", {xa, wa, ba});
  TORCH_CHECK(xc.dim() == 2 && wc.dim() == 2 && xc.size(1) == wc.size(1), "linear_act_forward: shapes do not match");
  const int64_t rows = xc.size(0), in_f = xc.size(1), out_f = wc.size(0);
  auto y = torch::empty({rows, out_f}, xc.options());
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  const float* bp = bc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float mult = static_cast<float>(multiplier), slope = static_cast<float>(negative_slope);
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o0 = 0; o0 < out_f; o0 += kColBlock) {
      const int64_t o1 = std::min(o0 + kColBlock, out_f);
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = xp + r * in_f;
        for (int64_t o = o0; o < o1; ++o) {
          const float* wr = wp + o * in_f;
          double acc = bp[o];
          for (int64_t k = 0; k < in_f; ++k) acc += static_cast<double>(xr[k]) * wr[k];
          const float v = static_cast<float>(acc) * mult;
          yp[r * out_f + o] = v > 0.f ? v : v * slope;
        }
      }
    }
  });
  return y;
}

void register_gemm_act(pybind11::module& m) {
  m.def("linear_act_forward", &linear_act_forward, "fused linear + multiply + LeakyReLU (CPU)", py::arg("x"),
        py::arg("weight"), py::arg("bias") = py::none(), py::arg("multiplier") = 1.0,
        py::arg("negative_slope") = 0.01);
}

REGISTER_BINDING(gemm_act, register_gemm_act);
