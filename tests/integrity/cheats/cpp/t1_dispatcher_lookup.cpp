// expect: T1.cpp.dispatcher
#include "../binding_registry.h"
#include <ATen/core/dispatch/Dispatcher.h>
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mm", "").typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}
