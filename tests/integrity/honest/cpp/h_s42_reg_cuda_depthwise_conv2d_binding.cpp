// Honest (session 42, registry convention, binding of h_s42_reg_cuda_depthwise_conv2d.cu): the kernel file's host
// function declared over two lines and registered under another name.
#include "../binding_registry.h"

#include <optional>

at::Tensor depthwise_conv2d_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                 int64_t stride, int64_t padding);

REGISTER_BINDING(depthwise_conv2d_forward, depthwise_conv2d_cuda);
