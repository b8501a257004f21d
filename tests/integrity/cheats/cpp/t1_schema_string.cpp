// expect: T1.cpp.dispatcher
#include "../binding_registry.h"
const char* kName = "aten::addmm";
