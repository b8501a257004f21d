// expect: T10.cpp.thread
#include <future>
int work(int n) { return n; }
void start() { auto f = std::async(std::launch::async, work, 3); }
