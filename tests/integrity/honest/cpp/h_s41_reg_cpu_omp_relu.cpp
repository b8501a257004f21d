// Honest (session 41, registry convention, CPU): ReLU with CHECK_* helper macros, an OpenMP loop and empty_like.
#include "../binding_registry.h"
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <cstdint>

#define CHECK_CPU(x) TORCH_CHECK(x.device().is_cpu(), #x " must be a CPU tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_FLOAT(x) TORCH_CHECK(x.scalar_type() == at::kFloat, #x " must be float32")
#define CHECK_INPUT(x) \
  CHECK_CPU(x);        \
  CHECK_CONTIGUOUS(x); \
  CHECK_FLOAT(x)

static void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::max(in[i], 0.0f);
  }
}

at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_INPUT(x);
  at::Tensor y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

REGISTER_BINDING(relu_forward, relu_forward);
