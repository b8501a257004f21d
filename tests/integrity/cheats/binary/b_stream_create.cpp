// expect: T9.binary.stream
extern "C" int cudaStreamCreateWithFlags(void**, unsigned);
void* side() { void* s = nullptr; cudaStreamCreateWithFlags(&s, 1); return s; }
