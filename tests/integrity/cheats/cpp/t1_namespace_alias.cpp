// expect: T1.cpp.namespace_import
#include "../binding_registry.h"
namespace T = torch;
at::Tensor gelu(const at::Tensor& a) { return T::gelu(a); }
