// expect: T1.cpp.module_handle
// Module methods other than def: def_submodule (PyImport_AddModule returns an existing module of that name) and
// add_object (overwrites an attribute) reach Python objects from the registration.
#include <torch/extension.h>

void register_sub(pybind11::module& m) {
  auto sub = m.def_submodule("ops");
  m.add_object("forward", py::none(), true);
}
