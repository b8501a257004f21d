// Honest (session 41, CUDA-Agent release convention, CPU): a sigmoid over float, double, Half and BFloat16 with
// AT_DISPATCH_FLOATING_TYPES_AND2 and at::opmath_type, a templated kernel, .numel() and .contiguous().
#include <torch/extension.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <cmath>

#include "../binding_registry.h"

namespace py = pybind11;

template <typename scalar_t>
static void sigmoid_kernel(const scalar_t* x, scalar_t* y, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const opmath_t v = static_cast<opmath_t>(x[i]);
    y[i] = static_cast<scalar_t>(opmath_t(1) / (opmath_t(1) + std::exp(-v)));
  }
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sigmoid_forward",
                                  [&]() { sigmoid_kernel<scalar_t>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                                                   xc.numel()); });
  return y;
}

void register_sigmoid(pybind11::module& m) {
  m.def("sigmoid_forward", &sigmoid_forward, py::arg("x"));
}

REGISTER_BINDING(sigmoid, register_sigmoid);
