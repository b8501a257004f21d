// Honest (session 42, registry convention, CPU): ReLU (KernelBench 19_ReLU) through at::parallel_for whose lambda
// takes the input and output pointers as init-captures (`[src = x.const_data_ptr<float>(), ...]`), a C++14 idiom.
#include "../binding_registry.h"
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>

#include <cstdint>

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: float32 expected");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  at::parallel_for(0, xc.numel(), 1 << 14,
                   [src = xc.const_data_ptr<float>(), dst = y.mutable_data_ptr<float>()](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
                   });
  return y;
}

REGISTER_BINDING(relu_forward, relu_forward);
