// expect: T1.binary.dispatcher
// Reaching an operator through the dispatcher by name.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("aten::mm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}
