// expect: T1.cpp.dynamic_loading
#include <dlfcn.h>
using mm_fn = void* (*)(void*, void*);
void* gemm(void* a, void* b) {
  void* h = dlopen("libtorch_cpu.so", RTLD_NOW);
  auto fn = reinterpret_cast<mm_fn>(dlsym(h, "_ZN2at6matmulERKNS_6TensorES3_"));
  return fn(a, b);
}
