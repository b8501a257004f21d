// Honest (session 42, CUDA-Agent release convention, CUDA, one file): 2-D max pooling (KernelBench level-1 42_Max_
// Pooling_2D) written the way PyTorch's own kernels are: CUDA_KERNEL_LOOP_TYPE over the outputs, the grid from
// at::cuda::detail::GET_BLOCKS and CUDA_NUM_THREADS (ATen/cuda/detail/KernelUtils.h), c10::cuda's current stream,
// -INFINITY as the seed, __ldg loads, NaN propagated.
#include <torch/extension.h>
#include <ATen/cuda/detail/KernelUtils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

__global__ void max_pool2d_kernel(const int64_t total, const float* __restrict__ x, float* __restrict__ y, int c, int h,
                                  int w, int out_h, int out_w, int k, int stride, int pad, int dilation) {
  CUDA_KERNEL_LOOP_TYPE(index, total, int64_t) {
    const int ow = static_cast<int>(index % out_w);
    const int oh = static_cast<int>((index / out_w) % out_h);
    const int64_t plane = index / (static_cast<int64_t>(out_w) * out_h);  // n * c + channel
    const float* in = x + plane * h * w;
    float best = -INFINITY;
    for (int i = 0; i < k; ++i) {
      const int ih = oh * stride - pad + i * dilation;
      if (ih < 0 || ih >= h) continue;
      for (int j = 0; j < k; ++j) {
        const int iw = ow * stride - pad + j * dilation;
        if (iw < 0 || iw >= w) continue;
        const float v = __ldg(in + ih * w + iw);
        if (v > best || isnan(v)) best = v;
      }
    }
    y[index] = best;
  }
}

torch::Tensor max_pool2d_forward(const torch::Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding,
                                 int64_t dilation) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 4 && x.scalar_type() == torch::kFloat32,
              "max_pool2d_forward: a 4-D float32 CUDA tensor expected");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const auto xc = x.contiguous();
  const int64_t n = xc.size(0), c = xc.size(1), h = xc.size(2), w = xc.size(3);
  const int64_t out_h = (h + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
  const int64_t out_w = (w + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
  auto y = torch::empty({n, c, out_h, out_w}, xc.options());
  const int64_t total = y.numel();
  if (total == 0) return y;
  max_pool2d_kernel<<<at::cuda::detail::GET_BLOCKS(total), at::cuda::detail::CUDA_NUM_THREADS, 0,
                      c10::cuda::getCurrentCUDAStream()>>>(
      total, xc.data_ptr<float>(), y.data_ptr<float>(), static_cast<int>(c), static_cast<int>(h), static_cast<int>(w),
      static_cast<int>(out_h), static_cast<int>(out_w), static_cast<int>(kernel_size), static_cast<int>(stride),
      static_cast<int>(padding), static_cast<int>(dilation));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

void register_max_pool2d(pybind11::module& m) {
  m.def("max_pool2d_forward", &max_pool2d_forward, "MaxPool2d (CUDA)", py::arg("x"), py::arg("kernel_size"),
        py::arg("stride"), py::arg("padding") = 0, py::arg("dilation") = 1);
}

REGISTER_BINDING(max_pool2d, register_max_pool2d);
