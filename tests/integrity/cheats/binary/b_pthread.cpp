// expect: T10.binary.thread
#include <pthread.h>
static void* work(void* p) { return p; }
void start() { pthread_t t; pthread_create(&t, nullptr, work, nullptr); }
