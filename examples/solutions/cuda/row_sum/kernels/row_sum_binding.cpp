// Registers cuda_extension.row_sum_forward(x, out).
#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t row_sum_launch(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);

void row_sum_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "row_sum_forward: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "row_sum_forward: contiguous 2-D float32 x expected");
  TORCH_CHECK(out.numel() == x.size(0) && out.scalar_type() == at::kFloat, "row_sum_forward: out must hold one float32 per row");
  const cudaError_t err = row_sum_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.size(0), x.size(1),
                                         static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "row_sum kernel launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(row_sum_forward, row_sum_forward);
