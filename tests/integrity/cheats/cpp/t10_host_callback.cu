// expect: T10.cpp.thread
void CUDART_CB later(void* p) {}
void launch(cudaStream_t s) { cudaLaunchHostFunc(s, later, nullptr); }
