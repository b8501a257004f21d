// expect: T12.cpp.file_io
#include <cstdio>
void save(const float* y, long n) {
  FILE* f = fopen("cache.bin", "wb");
  fwrite(y, sizeof(float), n, f);
}
