// expect: T8.binary.clock
// Session 39's red team: a clock the source rules did not know (std::clock), seen as the module's import of clock.
#include <ctime>
long cpu_ticks() { return static_cast<long>(std::clock()); }
