// Honest (session 42, registry convention, CPU): row softmax (KernelBench 23_Softmax) with its helpers in an anonymous
// namespace (a constexpr helper, an inline host helper, a struct of row pointers), an OpenMP loop over rows, the
// max seeded with std::numeric_limits<float>::lowest(), the sum in double, const_data_ptr/mutable_data_ptr.
#include "../binding_registry.h"
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {

constexpr int64_t kMinColsForSimd = 8;

struct Row {
  const float* in;
  float* out;
  int64_t cols;
};

inline float row_max(const Row& r) {
  float m = std::numeric_limits<float>::lowest();
  for (int64_t c = 0; c < r.cols; ++c) m = std::max(m, r.in[c]);
  return m;
}

void softmax_row(const Row& r) {
  const float m = row_max(r);
  double sum = 0.0;
  if (r.cols >= kMinColsForSimd) {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < r.cols; ++c) {
      const float e = std::exp(r.in[c] - m);
      r.out[c] = e;
      sum += e;
    }
  } else {
    for (int64_t c = 0; c < r.cols; ++c) {
      r.out[c] = std::exp(r.in[c] - m);
      sum += r.out[c];
    }
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t c = 0; c < r.cols; ++c) r.out[c] *= inv;
}

}  // namespace

at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, "softmax_forward: expected a 2-D input, got ", x.dim(), "-D");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "softmax_forward: float32 expected");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  const int64_t rows = xc.size(0), cols = xc.size(1);
  const float* in = xc.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    softmax_row(Row{in + r * cols, out + r * cols, cols});
  }
  return y;
}

REGISTER_BINDING(softmax_forward, softmax_forward);
