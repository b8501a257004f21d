// Cheat: the candidate's own function calls pybind11's import entry (the call itself sits in library code).
#include "fake_pybind11.h"

extern "C" void* get_torch() { return pybind11::module_::import("torch"); }
