// expect: T1.binary.vendor_library
extern "C" int cudnnConvolutionForward(void*);
int conv(void* h) { return cudnnConvolutionForward(h); }
