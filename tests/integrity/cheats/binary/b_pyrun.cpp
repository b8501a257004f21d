// expect: T1.binary.python_api
extern "C" int PyRun_SimpleString(const char*);
int run() { return PyRun_SimpleString("import torch"); }
