// Registers cuda_extension.gemm_bias_relu_forward(x, weight, bias, out).
#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t gemm_bias_relu_launch(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                                  int64_t k, cudaStream_t stream);

void gemm_bias_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && out.is_cuda(), "gemm_bias_relu_forward: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "gemm_bias_relu_forward: x [M,K] and weight [N,K] expected");
  TORCH_CHECK(bias.numel() == weight.size(0) && out.size(0) == x.size(0) && out.size(1) == weight.size(0), "gemm_bias_relu_forward: bias [N] and out [M,N] expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() && out.is_contiguous(), "gemm_bias_relu_forward: contiguous tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "gemm_bias_relu_forward: float32 expected");
  const cudaError_t err = gemm_bias_relu_launch(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                                                out.mutable_data_ptr<float>(), x.size(0), weight.size(0), x.size(1),
                                                static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "gemm_bias_relu kernel launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(gemm_bias_relu_forward, gemm_bias_relu_forward);
