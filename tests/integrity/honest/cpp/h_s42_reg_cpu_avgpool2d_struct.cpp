// Honest (session 42, registry convention, CPU): 2-D average pooling (KernelBench level-1 "Average Pooling 2D"), the
// geometry in a struct passed by value to the kernel function, sizes destructured from x.sizes(), strides read with
// x.stride(i) (any layout), count_include_pad as a bool argument.
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>

struct PoolGeometry {
  int64_t n, c, h, w;
  int64_t out_h, out_w;
  int64_t kernel, stride, pad;
  int64_t sn, sc, sh, sw;  // input strides, in elements
  bool count_include_pad;
};

static void avg_pool2d_kernel(const float* __restrict__ in, float* __restrict__ out, PoolGeometry g) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t ch = 0; ch < g.c; ++ch) {
      const float* plane = in + b * g.sn + ch * g.sc;
      float* dst = out + (b * g.c + ch) * g.out_h * g.out_w;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const int64_t h0 = oh * g.stride - g.pad, w0 = ow * g.stride - g.pad;
          const int64_t h1 = std::min(h0 + g.kernel, g.h + g.pad), w1 = std::min(w0 + g.kernel, g.w + g.pad);
          const int64_t padded = (h1 - h0) * (w1 - w0);
          const int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
          const int64_t he = std::min(h1, g.h), we = std::min(w1, g.w);
          float acc = 0.f;
          for (int64_t ih = hs; ih < he; ++ih)
            for (int64_t iw = ws; iw < we; ++iw) acc += plane[ih * g.sh + iw * g.sw];
          const int64_t count = g.count_include_pad ? padded : (he - hs) * (we - ws);
          dst[oh * g.out_w + ow] = count > 0 ? acc / static_cast<float>(count) : 0.f;
        }
      }
    }
  }
}

at::Tensor avg_pool2d_forward(const at::Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding,
                              bool count_include_pad) {
  TORCH_CHECK(x.dim() == 4 && x.scalar_type() == at::kFloat, "avg_pool2d_forward: a 4-D float32 input expected");
  if (stride <= 0) stride = kernel_size;  // nn.AvgPool2d's stride=None
  const auto sizes = x.sizes();
  const int64_t n = sizes[0], c = sizes[1], h = sizes[2], w = sizes[3];
  PoolGeometry g{n, c, h, w,
                 (h + 2 * padding - kernel_size) / stride + 1, (w + 2 * padding - kernel_size) / stride + 1,
                 kernel_size, stride, padding,
                 x.stride(0), x.stride(1), x.stride(2), x.stride(3), count_include_pad};
  at::Tensor y = at::empty({n, c, g.out_h, g.out_w}, x.options());
  avg_pool2d_kernel(x.data_ptr<float>(), y.data_ptr<float>(), g);
  return y;
}

REGISTER_BINDING(avg_pool2d_forward, avg_pool2d_forward);
