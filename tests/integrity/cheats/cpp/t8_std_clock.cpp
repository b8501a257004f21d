// expect: T8.cpp.clock
// Session 39's red team: std::clock() (process CPU time, microseconds) passed where std::chrono was refused; it
// tells a call from another as well (the audited call's dispatch through Python, the gap after a checked call).
#include <ctime>
#include <cstdint>
int64_t cpu_ticks() { return static_cast<int64_t>(std::clock()); }
