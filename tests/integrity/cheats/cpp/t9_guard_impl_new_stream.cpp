// expect: T9.cpp.stream
#include "../binding_registry.h"
void* side_stream(const at::Tensor& x) {
  c10::impl::VirtualGuardImpl impl(x.device().type());
  return impl.getNewStream(x.device()).native_handle();
}
