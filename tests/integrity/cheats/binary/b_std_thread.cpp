// expect: T10.binary.thread
#include <thread>
void start(float* y) { std::thread([y] { y[0] = 1.f; }).detach(); }
