// Honest (session 41, registry convention, binding of h_s41_reg_cuda_warp_softmax.cu): REGISTER_BINDING, the
// current stream from cuda_agent_binding::current_stream, a launch error turned into TORCH_CHECK.
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "softmax_forward: x must be a contiguous 2-D float32 tensor");
  at::Tensor y = at::empty({x.size(0), x.size(1)}, x.options());
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
  const cudaError_t err = softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), stream);
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(softmax_forward, softmax_forward);
