// expect: T1.binary.vendor_library
extern "C" int cublasSgemm_v2(void*, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*, float*, int);
int gemm(void* h, const float* a, float* c) { float one = 1; return cublasSgemm_v2(h, 0, 0, 4, 4, 4, &one, a, 4, a, 4, &one, c, 4); }
