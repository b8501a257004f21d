// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "softmax_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
  auto out = at::empty(x.sizes(), x.options());
  const float* x_p = x.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = softmax_launch(x_p, out_p, x.size(0), x.size(1), static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

REGISTER_BINDING(softmax_forward, softmax_forward);
