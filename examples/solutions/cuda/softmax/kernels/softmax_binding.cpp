// Registers cuda_extension.softmax_forward(x, out).
#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

void softmax_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "softmax_forward: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && out.is_contiguous(), "softmax_forward: contiguous float32 tensors expected");
  TORCH_CHECK(x.sizes() == out.sizes(), "softmax_forward: x and out differ in shape");
  const int64_t cols = x.size(-1);
  const cudaError_t err = softmax_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel() / cols, cols,
                                         static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "softmax kernel launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(softmax_forward, softmax_forward);
