// expect: T9.binary.stream
namespace c10 { namespace cuda { struct CUDAStream { void* p; }; CUDAStream getStreamFromPool(bool, signed char); } }
void* side() { return c10::cuda::getStreamFromPool(false, 0).p; }
