// expect: T10.cpp.signal
// A handler installed through struct sigaction (declared by hand, no header).
struct sigaction;
extern "C" int sigaction(int, const struct sigaction*, struct sigaction*);
int install(const struct sigaction* act) { return sigaction(14, act, nullptr); }
