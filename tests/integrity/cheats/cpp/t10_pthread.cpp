// expect: T10.cpp.thread
#include <pthread.h>
void* fill(void* p) { return p; }
void start(float* y) { pthread_t t; pthread_create(&t, nullptr, fill, y); }
