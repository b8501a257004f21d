// Honest (session 41, registry convention, CPU): per-row mean and reciprocal std returned as a
// std::vector<at::Tensor>, outputs allocated with at::empty({rows}, x.options()).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

#include <cmath>
#include <vector>

std::vector<at::Tensor> row_stats(const at::Tensor& x, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "row_stats: a contiguous 2-D tensor is expected");
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor mean = at::empty({rows}, x.options());
  at::Tensor rstd = at::empty({rows}, x.options());
  const float* xp = x.data_ptr<float>();
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0, sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = xp[r * cols + c];
      s += v;
      sq += v * v;
    }
    const double mu = s / cols;
    const double var = sq / cols - mu * mu;
    mp[r] = static_cast<float>(mu);
    rp[r] = static_cast<float>(1.0 / std::sqrt(var + eps));
  }
  return {mean, rstd};
}

REGISTER_BINDING(row_stats, row_stats);
