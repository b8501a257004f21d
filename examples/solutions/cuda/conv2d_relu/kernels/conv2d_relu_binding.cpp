// Registers cuda_extension.conv2d_relu_forward(x, weight, bias, out, padding).
#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t conv2d_relu_launch(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, int64_t h,
                               int64_t wd, int64_t oc, int64_t kh, int64_t kw, int64_t pad, cudaStream_t stream);

void conv2d_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& out,
                         int64_t padding) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && out.is_cuda(), "conv2d_relu_forward: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && x.size(1) == weight.size(1), "conv2d_relu_forward: NCHW x and [OC,C,KH,KW] weight expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() && out.is_contiguous(), "conv2d_relu_forward: contiguous tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "conv2d_relu_forward: float32 expected");
  const int64_t oh = x.size(2) + 2 * padding - weight.size(2) + 1, ow = x.size(3) + 2 * padding - weight.size(3) + 1;
  TORCH_CHECK(out.size(0) == x.size(0) && out.size(1) == weight.size(0) && out.size(2) == oh && out.size(3) == ow, "conv2d_relu_forward: out has the wrong shape");
  const cudaError_t err = conv2d_relu_launch(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                                             out.mutable_data_ptr<float>(), x.size(0), x.size(1), x.size(2), x.size(3),
                                             weight.size(0), weight.size(2), weight.size(3), padding,
                                             static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "conv2d_relu kernel launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(conv2d_relu_forward, conv2d_relu_forward);
