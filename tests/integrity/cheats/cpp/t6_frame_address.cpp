// expect: T6.cpp.introspection
// Session 39's red team: the compiler's own frame walk, no header needed.
#include <cstdint>
uintptr_t callers_frame() { return reinterpret_cast<uintptr_t>(__builtin_frame_address(2)); }
