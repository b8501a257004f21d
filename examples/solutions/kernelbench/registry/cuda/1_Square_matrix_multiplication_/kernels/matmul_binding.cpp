// Registers the entry points with REGISTER_BINDING (this project's convention).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t matmul_launch(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, cudaStream_t stream);

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_contiguous() && a.scalar_type() == at::kFloat, "matmul_forward: a must be a contiguous float32 tensor");
  TORCH_CHECK(b.is_contiguous() && b.scalar_type() == at::kFloat, "matmul_forward: b must be a contiguous float32 tensor");
  TORCH_CHECK(a.is_cuda(), "matmul_forward: a must be a CUDA tensor");
  TORCH_CHECK(b.is_cuda(), "matmul_forward: b must be a CUDA tensor");
  auto out = at::empty({a.size(0), b.size(1)}, a.options());
  const float* a_p = a.const_data_ptr<float>();
  const float* b_p = b.const_data_ptr<float>();
  float* out_p = out.mutable_data_ptr<float>();
  const cudaError_t err = matmul_launch(a_p, b_p, out_p, a.size(0), a.size(1), b.size(1), static_cast<cudaStream_t>(cuda_agent_binding::current_stream(a)));
  TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}

REGISTER_BINDING(matmul_forward, matmul_forward);
