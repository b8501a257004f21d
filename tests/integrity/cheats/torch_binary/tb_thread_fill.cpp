// expect: T10.binary.thread
// Returns an unfinished output that a detached thread fills later.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

#include <thread>

at::Tensor relu_later(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x);
  std::thread([x, y]() {
    const float* in = x.const_data_ptr<float>();
    float* out = y.mutable_data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0 ? in[i] : 0;
  }).detach();
  return y;
}
