// Honest (session 41, registry convention, binding of h_s41_reg_cuda_constant_conv1d.cu).
#include "../binding_registry.h"
#include <ATen/ops/empty.h>
#include <cuda_runtime_api.h>

cudaError_t conv1d_launch(const float* x, const float* taps, float* y, int64_t n, int taps_n, cudaStream_t stream);

at::Tensor conv1d_forward(const at::Tensor& x, const at::Tensor& taps) {
  TORCH_CHECK(x.dim() == 1 && taps.dim() == 1, "conv1d_forward: 1-D signal and taps expected");
  TORCH_CHECK(x.size(0) >= taps.size(0), "conv1d_forward: signal shorter than the filter");
  const at::Tensor xc = x.contiguous(), tc = taps.contiguous();
  at::Tensor y = at::empty({x.size(0) - taps.size(0) + 1}, x.options());
  const cudaError_t err = conv1d_launch(xc.data_ptr<float>(), tc.data_ptr<float>(), y.data_ptr<float>(), x.size(0),
                                        static_cast<int>(taps.size(0)),
                                        static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "conv1d_forward: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(conv1d_forward, conv1d_forward);
