// Registers cuda_extension.swish_forward(x, out).
#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

void swish_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "swish_forward: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "swish_forward: float32 tensors expected");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "swish_forward: contiguous tensors of equal size expected");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(out.const_data_ptr()) % 16 == 0,
              "swish_forward: 16-byte aligned tensors expected");
  const cudaError_t err = swish_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(),
                                       static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "swish kernel launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(swish_forward, swish_forward);
