// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  auto out = at::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = relu_launch(x_p, out_p, x.numel(), static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "relu_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

REGISTER_BINDING(relu_forward, relu_forward);
