// expect: T23.cpp.system_call
#include <cstdlib>
bool grading() { return getenv("CUDA_AGENT_PHASE") != nullptr; }
