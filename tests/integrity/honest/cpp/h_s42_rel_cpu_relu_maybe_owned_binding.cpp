// Honest (session 42, CUDA-Agent release convention, CPU): ReLU (KernelBench 19_ReLU) taking a contiguous view through
// x.expect_contiguous() (c10::MaybeOwned<torch::Tensor>: no copy when already contiguous), an `omp parallel for simd`
// loop, and a keyword argument that refuses implicit conversion (py::arg("x").noconvert()).
#include <torch/extension.h>

#include "../binding_registry.h"

namespace py = pybind11;

torch::Tensor relu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "relu_forward: a CPU tensor expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: float32 expected");
  const c10::MaybeOwned<torch::Tensor> xc = x.expect_contiguous();
  auto y = torch::empty_like(*xc);
  const float* in = xc->data_ptr<float>();
  float* out = y.data_ptr<float>();
  const int64_t n = xc->numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
  return y;
}

void register_relu(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, "ReLU (CPU)", py::arg("x").noconvert());
}

REGISTER_BINDING(relu, register_relu);
