// Honest (session 42, registry convention, CPU): min and argmin over one dimension (KernelBench level-1 "Min reduction
// over a dimension" and "Argmin over a dimension") returned together as std::tuple<at::Tensor, at::Tensor>; the
// dimension normalised with at::maybe_wrap_dim, the output shape from x.sizes().vec(), indices as at::kLong.
#include "../binding_registry.h"
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

std::tuple<at::Tensor, at::Tensor> min_argmin_forward(const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "min_argmin_forward: float32 expected");
  TORCH_CHECK(x.dim() >= 1, "min_argmin_forward: a 0-d input has no dimension to reduce");
  dim = at::maybe_wrap_dim(dim, x.dim());
  const at::Tensor xc = x.contiguous();
  std::vector<int64_t> out_sizes = xc.sizes().vec();
  out_sizes.erase(out_sizes.begin() + dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
  for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
  const int64_t len = xc.size(dim);
  TORCH_CHECK(len > 0, "min_argmin_forward: cannot reduce an empty dimension");
  at::Tensor values = at::empty(out_sizes, xc.options());
  at::Tensor indices = at::empty(out_sizes, xc.options().dtype(at::kLong));
  const float* in = xc.data_ptr<float>();
  float* vp = values.data_ptr<float>();
  int64_t* ip = indices.data_ptr<int64_t>();
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float* base = in + o * len * inner + i;
      float best = std::numeric_limits<float>::infinity();
      int64_t where = 0;
      for (int64_t k = 0; k < len; ++k) {
        const float v = base[k * inner];
        if (v < best || (v != v && best == best)) {  // the first NaN wins, as torch.min does
          best = v;
          where = k;
        }
      }
      vp[o * inner + i] = best;
      ip[o * inner + i] = where;
    }
  }
  return std::make_tuple(values, indices);
}

REGISTER_BINDING(min_argmin_forward, min_argmin_forward);
