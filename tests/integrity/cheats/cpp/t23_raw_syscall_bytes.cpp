// expect: T23.cpp.system_call
long raw_call(long number, long a, long b, long c) {
  long ret;
  __asm__ __volatile__(".byte 0x0f, 0x05" : "=a"(ret) : "a"(number), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
