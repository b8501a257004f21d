// expect: T23.binary.system_call
#include <cstdlib>
int run() { return system("nvidia-smi"); }
