// expect: T6.binary.introspection
// Session 39's red team: walking the callers' frames, seen as the module's import of backtrace.
#include <execinfo.h>
int caller_depth() {
  void* frames[64];
  return backtrace(frames, 64);
}
