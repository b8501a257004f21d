// Honest (session 41, registry convention, CPU): a templated GELU (tanh form) dispatched with
// AT_DISPATCH_FLOATING_TYPES and a lambda, static constexpr coefficients.
#include "../binding_registry.h"
#include <ATen/Dispatch.h>
#include <ATen/ops/empty_like.h>

#include <cmath>

namespace {

static constexpr double kSqrt2OverPi = 0.7978845608028654;
static constexpr double kCoeff = 0.044715;

template <typename scalar_t>
void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const scalar_t v = x[i];
    const scalar_t inner = static_cast<scalar_t>(kSqrt2OverPi) * (v + static_cast<scalar_t>(kCoeff) * v * v * v);
    y[i] = static_cast<scalar_t>(0.5) * v * (static_cast<scalar_t>(1) + std::tanh(inner));
  }
}

}  // namespace

at::Tensor gelu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous(), "gelu_forward: x must be contiguous");
  auto y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gelu_forward", [&] {
    gelu_kernel<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel());
  });
  return y;
}

REGISTER_BINDING(gelu_forward, gelu_forward);
