// expect: T23.cpp.system_call
#include <cstdlib>
void run() { system("nvidia-smi -lgc 1980"); }
