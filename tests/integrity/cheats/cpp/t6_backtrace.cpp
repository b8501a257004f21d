// expect: T6.cpp.introspection
// Session 39's red team: the native side of sys._getframe; the depth or the return addresses of the callers tell
// the audited or verifying call (another Python path into forward) from a timed one.
#include <execinfo.h>
int caller_depth() {
  void* frames[64];
  return backtrace(frames, 64);
}
