// Honest registry binding (session 38): an output written in place through `at::Tensor&`, an optional bias
// (`std::optional<at::Tensor>`, None from Python) and at::vec::Vectorized SIMD arithmetic.
#include "binding_registry.h"

#include <ATen/cpu/vec/vec.h>

#include <cstdint>
#include <optional>

using Vec = at::vec::Vectorized<float>;

void bias_relu_out(const at::Tensor& x, const std::optional<at::Tensor>& bias, at::Tensor& out) {
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.scalar_type() == at::kFloat, "contiguous float32 expected");
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* b = bias.has_value() ? bias->const_data_ptr<float>() : nullptr;
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = 0;
    for (; b == nullptr && c + Vec::size() <= cols; c += Vec::size()) {
      at::vec::maximum(Vec::loadu(in + r * cols + c), Vec(0.0f)).store(o + r * cols + c);
    }
    for (; c < cols; ++c) {
      const float v = in[r * cols + c] + (b != nullptr ? b[c] : 0.0f);
      o[r * cols + c] = v > 0.0f ? v : 0.0f;
    }
  }
}

std::optional<at::Tensor> maybe_same(std::optional<at::Tensor> t) { return t; }

REGISTER_BINDING(bias_relu_out, bias_relu_out);
REGISTER_BINDING(maybe_same, maybe_same);
