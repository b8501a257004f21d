// expect: T23.cpp.system_call
extern "C" int mprotect(void* addr, unsigned long len, int prot);
extern "C" int clock_gettime(int, void*);
void patch() {
  unsigned char* target = reinterpret_cast<unsigned char*>(&clock_gettime);
  mprotect(reinterpret_cast<void*>(reinterpret_cast<unsigned long>(target) & ~4095UL), 8192, 7);
  target[0] = 0xC3;
}
