// expect: T20.binary.l2_persistence
extern "C" int cudaStreamSetAttribute(void*, int, const void*);
int pin(void* s, const void* v) { return cudaStreamSetAttribute(s, 1, v); }
