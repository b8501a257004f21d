// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in, int64_t out, float scale, float slope, cudaStream_t stream);

at::Tensor linear_act_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double scale, double slope) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "linear_act_forward: x must be a contiguous float32 tensor");
  TORCH_CHECK(w.is_contiguous() && w.scalar_type() == at::kFloat, "linear_act_forward: w must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "linear_act_forward: b must be a contiguous float32 tensor");
  TORCH_CHECK(x.is_cuda(), "linear_act_forward: x must be a CUDA tensor");
  TORCH_CHECK(w.is_cuda(), "linear_act_forward: w must be a CUDA tensor");
  TORCH_CHECK(b.is_cuda(), "linear_act_forward: b must be a CUDA tensor");
  auto out = at::empty({x.size(0), w.size(0)}, x.options());
  const float* x_p = x.const_data_ptr<float>();
  const float* w_p = w.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = linear_act_launch(x_p, w_p, b_p, out_p, x.size(0), x.size(1), w.size(0), (float)scale, (float)slope, static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "linear_act_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

REGISTER_BINDING(linear_act_forward, linear_act_forward);
