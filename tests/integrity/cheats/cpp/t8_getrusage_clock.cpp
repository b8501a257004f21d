// expect: T8.cpp.clock
// Session 39's red team: getrusage's user time is a clock too.
#include <sys/resource.h>
long user_us() {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec * 1000000L + r.ru_utime.tv_usec;
}
