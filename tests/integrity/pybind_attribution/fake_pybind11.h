// A stand-in for pybind11's machinery (compiles in a second, no Python headers): library code in namespace
// pybind11 that calls into Python the way real casters and cpp_function dispatchers may.
#pragma once
extern "C" void* PyObject_CallObject(void* callable, void* args);
extern "C" void* PyImport_ImportModule(const char* name);

namespace pybind11 {
namespace detail {
// Machinery: converts a result by calling a Python type (as pybind11's casters can).
__attribute__((noinline)) inline void* cast_by_call(void* type) { return PyObject_CallObject(type, nullptr); }
}  // namespace detail

struct module_ {
  // Registration: what m.def does, through machinery that references PyObject_CallObject.
  template <class F>
  __attribute__((noinline)) void* def(const char*, F f) { return detail::cast_by_call(reinterpret_cast<void*>(f)); }
  // A Python-level entry: importing a module.
  __attribute__((noinline)) static void* import(const char* name) { return PyImport_ImportModule(name); }
};

// A dispatcher instantiated with the candidate's callable (the compiler may inline the callable into it).
template <class F>
__attribute__((noinline)) void* dispatch(F f, void* arg) { return f(arg); }
}  // namespace pybind11
