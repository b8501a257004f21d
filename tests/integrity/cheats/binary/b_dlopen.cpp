// expect: T1.binary.dynamic_loading
#include <dlfcn.h>
void* load() { return dlsym(dlopen("libtorch_cpu.so", RTLD_NOW), "x"); }
