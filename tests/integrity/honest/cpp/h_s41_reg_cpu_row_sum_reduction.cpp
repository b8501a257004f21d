// Honest (session 41, registry convention, CPU): a keepdim row sum with an OpenMP reduction clause and
// at::IntArrayRef shape handling.
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

#include <vector>

at::Tensor row_sum(const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(dim == x.dim() - 1 || dim == -1, "row_sum: only the last dimension is supported");
  const at::Tensor xc = x.contiguous();
  const at::IntArrayRef sizes = xc.sizes();
  std::vector<int64_t> out_sizes(sizes.begin(), sizes.end());
  const int64_t cols = out_sizes.back();
  out_sizes.back() = 1;
  at::Tensor y = at::empty(out_sizes, xc.options());
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  const float* xp = xc.const_data_ptr<float>();
  float* yp = y.mutable_data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
#pragma omp parallel for reduction(+ : acc)
    for (int64_t c = 0; c < cols; ++c) acc += xp[r * cols + c];
    yp[r] = acc;
  }
  return y;
}

REGISTER_BINDING(row_sum, row_sum);
