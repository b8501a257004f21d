// Honest (session 42, registry convention, binding of h_s42_reg_cuda_cumsum_scan.cu): the launcher declared over two
// lines with a default stream argument (`cudaStream_t stream = nullptr);`), called with the current stream.
#include "../binding_registry.h"
#include <ATen/ops/empty_like.h>
#include <cuda_runtime_api.h>

cudaError_t cumsum_launch(const float* x, float* y, int64_t rows, int64_t cols,
                          cudaStream_t stream = nullptr);

at::Tensor cumsum_forward(const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == at::kFloat,
              "cumsum_forward: a 2-D float32 CUDA tensor expected");
  TORCH_CHECK(dim == 1 || dim == -1, "cumsum_forward: only the last dimension is supported");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(xc));
  const cudaError_t err = cumsum_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), stream);
  TORCH_CHECK(err == cudaSuccess, "cumsum_forward: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(cumsum_forward, cumsum_forward);
