// expect: T1.binary.python_api
extern "C" void* PyImport_ImportModule(const char*);
void* torch_module() { return PyImport_ImportModule("torch"); }
