// Honest (session 41, registry convention, CPU): row softmax with at::parallel_for, at::internal::GRAIN_SIZE,
// std::max/std::exp, sizes and strides read from the tensor.
#include "../binding_registry.h"
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <limits>

at::Tensor softmax_forward(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() == 2, "softmax_forward: expected a 2-D tensor, got ", x_in.dim(), " dims");
  TORCH_CHECK(x_in.scalar_type() == at::kFloat, "softmax_forward: float32 only");
  const at::Tensor x = x_in.contiguous();
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  const int64_t row_stride = x.stride(0);
  at::Tensor y = at::empty({rows, cols}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = xp + r * row_stride;
      float* out = yp + r * cols;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, in[c]);
      float s = 0.0f;
      for (int64_t c = 0; c < cols; ++c) {
        out[c] = std::exp(in[c] - m);
        s += out[c];
      }
      const float inv = 1.0f / s;
      for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
    }
  });
  return y;
}

REGISTER_BINDING(softmax_forward, softmax_forward);
