// Honest (session 42, CUDA-Agent release convention, CPU): sum over one dimension with keepdim (KernelBench level-1
// 47_Sum_reduction_over_a_dimension), the dimension normalised with at::maybe_wrap_dim, the output shape from
// x.sizes().vec(), an OpenMP loop over (outer, inner) pairs accumulating in double.
#include <torch/extension.h>
#include <ATen/WrapDimUtils.h>

#include <vector>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor sum_dim_forward(const torch::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_forward: float32 expected");
  dim = at::maybe_wrap_dim(dim, x.dim());
  const torch::Tensor xc = x.contiguous();
  std::vector<int64_t> out_sizes = xc.sizes().vec();
  out_sizes[dim] = 1;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
  for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
  const int64_t len = xc.size(dim);
  auto y = torch::empty(out_sizes, xc.options());
  const float* in = xc.data_ptr<float>();
  float* out = y.data_ptr<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0.0;
      for (int64_t k = 0; k < len; ++k) acc += in[(o * len + k) * inner + i];
      out[o * inner + i] = static_cast<float>(acc);
    }
  }
  return y;
}

void register_sum_dim(pybind11::module& m) {
  m.def("sum_dim_forward", &sum_dim_forward, "sum over one dimension, keepdim=True (CPU)", py::arg("x"),
        py::arg("dim"));
}

REGISTER_BINDING(sum_dim, register_sum_dim);
