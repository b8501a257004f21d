// expect: T1.cpp.namespace_import
// A type caster specialisation runs the candidate's code inside pybind11's machinery.
#include <torch/extension.h>

struct Handle { int v; };
template <>
struct pybind11::detail::type_caster<Handle> {
  PYBIND11_TYPE_CASTER(Handle, _("Handle"));
  bool load(handle src, bool) { value.v = 1; return true; }
};
