// Honest: registers a kernel; only pybind11's own machinery references PyObject_CallObject.
#include "fake_pybind11.h"

void* scale_kernel(void* x) { return x; }

extern "C" void* register_scale(pybind11::module_& m) { return m.def("scale", &scale_kernel); }
