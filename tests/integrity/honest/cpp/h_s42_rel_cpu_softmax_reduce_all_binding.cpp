// Honest (session 42, CUDA-Agent release convention, CPU): row softmax (KernelBench 23_Softmax) with ATen's header-only
// vector helpers at::vec::reduce_all (row max, row sum) and at::vec::map (exp of the shifted row, the scaling) over
// `using Vec = at::vec::Vectorized<float>`, rows split with at::parallel_for.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include "../binding_registry.h"

namespace py = pybind11;

using Vec = at::vec::Vectorized<float>;

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "softmax_forward: a 2-D float32 tensor expected");
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = xp + r * cols;
      float* out = yp + r * cols;
      const float row_max = at::vec::reduce_all<float>(
          [](const Vec& a, const Vec& b) { return at::vec::maximum(a, b); }, in, cols);
      at::vec::map([row_max](Vec v) { return (v - Vec(row_max)).exp(); }, out, in, cols);
      const float total = at::vec::reduce_all<float>([](const Vec& a, const Vec& b) { return a + b; }, out, cols);
      const float inv = 1.f / total;
      at::vec::map([inv](Vec v) { return v * Vec(inv); }, out, out, cols);
    }
  });
  return y;
}

void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "row softmax (CPU, at::vec)", py::arg("x"));
}

REGISTER_BINDING(softmax, register_softmax);
