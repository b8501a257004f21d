// Honest (session 41, registry convention, CPU): a full sum with at::parallel_reduce, a per-thread scratch slot picked
// with at::get_thread_num(), and polynomial coefficients in a `static const std::array` of literals. Each was refused
// before session 41 (T1.cpp.aten_call, T12.cpp.static_cache).
#include "../binding_registry.h"
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <array>
#include <functional>

at::Tensor sum_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "sum_forward: contiguous float32 expected");
  const float* p = x.const_data_ptr<float>();
  const double total = at::parallel_reduce(
      0, x.numel(), at::internal::GRAIN_SIZE, 0.0,
      [&](int64_t begin, int64_t end, double acc) {
        for (int64_t i = begin; i < end; ++i) acc += p[i];
        return acc;
      },
      std::plus<double>());
  at::Tensor out = at::empty({}, x.options());
  *out.mutable_data_ptr<float>() = static_cast<float>(total);
  return out;
}

at::Tensor poly_row_sums(const at::Tensor& x) {
  static const std::array<float, 4> kCoeffs = {0.5f, -1.25f, 2.0f, 1e-3f};
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "poly_row_sums: contiguous 2-D input expected");
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor partial = at::zeros({at::get_num_threads(), rows}, x.options());
  float* scratch = partial.mutable_data_ptr<float>();
  const float* p = x.const_data_ptr<float>();
  at::parallel_for(0, rows * cols, 4096, [&](int64_t begin, int64_t end) {
    float* mine = scratch + at::get_thread_num() * rows;
    for (int64_t i = begin; i < end; ++i) {
      const float v = p[i];
      mine[i / cols] += ((kCoeffs[3] * v + kCoeffs[2]) * v + kCoeffs[1]) * v + kCoeffs[0];
    }
  });
  at::Tensor out = at::empty({rows}, x.options());
  float* o = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0.f;
    for (int64_t t = 0; t < partial.size(0); ++t) s += scratch[t * rows + r];
    o[r] = s;
  }
  return out;
}

REGISTER_BINDING(sum_forward, sum_forward);
REGISTER_BINDING(poly_row_sums, poly_row_sums);
