"""Honest (session 41, KernelBench single file, CUDA): the sources define their own PYBIND11_MODULE (no `functions=`),
with `namespace py = pybind11;`, keyword arguments, a default value and a module docstring; a fused bias + scale +
ReLU epilogue kernel with a grid-stride loop; ModelNew owns the bias parameter and passes it in."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = """
#include <torch/extension.h>
namespace py = pybind11;

torch::Tensor bias_scale_relu(torch::Tensor x, torch::Tensor bias, double scale);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "fused bias + scale + relu";
    m.def("bias_scale_relu", &bias_scale_relu, "y = relu((x + bias) * scale)",
          py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
}
"""

cuda_src = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void bias_scale_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ y, float scale, int64_t n, int64_t channels,
                                       int64_t inner) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        const int64_t c = (i / inner) % channels;
        const float v = (x[i] + bias[c]) * scale;
        y[i] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor bias_scale_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    const c10::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int64_t channels = xc.size(1);
    const int64_t inner = n / (xc.size(0) * channels);
    const int threads = 512;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    bias_scale_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n, channels, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

fused = load_inline(name="fused_bias_scale_relu", cpp_sources=cpp_src, cuda_sources=cuda_src, verbose=False)


class ModelNew(nn.Module):
    def __init__(self, channels, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels))
        self.scale = scale

    def forward(self, x):
        return fused.bias_scale_relu(x, self.bias, scale=self.scale)
