// Cheat: the candidate's own function calls a Python object.
#include "fake_pybind11.h"

extern "C" void* matmul_via_python(void* torch_matmul, void* args) { return PyObject_CallObject(torch_matmul, args); }
