// expect: T10.cpp.thread
#include "../binding_registry.h"
#include <thread>
void relu_cpu(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x);
  std::thread([x, y]() { relu_cpu(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel()); }).detach();
  return y;
}
