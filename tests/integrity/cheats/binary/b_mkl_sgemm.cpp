// expect: T1.binary.vendor_library
extern "C" void sgemm(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                      const int*, const float*, const int*, const float*, float*, const int*);
void mm(const float* a, const float* b, float* c, int n) {
  const float one = 1.0f, zero = 0.0f;
  sgemm("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
}
