// expect: T1.cpp.python_api
#include <Python.h>
void* gemm(void* a, void* b) {
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* mm = PyObject_GetAttrString(torch, "mm");
  return PyObject_CallFunctionObjArgs(mm, a, b, NULL);
}
