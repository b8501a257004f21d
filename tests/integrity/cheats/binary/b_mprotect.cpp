// expect: T23.binary.system_call
extern "C" int mprotect(void* addr, unsigned long len, int prot);
extern "C" int clock_gettime(int, void*);
int patch() { return mprotect((void*)((unsigned long)&clock_gettime & ~4095UL), 8192, 7); }
