// expect: T1.cpp.dispatch_guard
#include "../binding_registry.h"
at::Tensor hide(const at::Tensor& a) {
  c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::Python);
  return a;
}
