// expect: T10.binary.signal
extern "C" {
struct timeval_ { long s; long us; };
struct itimer_ { timeval_ interval; timeval_ value; };
int setitimer(int, const itimer_*, itimer_*);
}
int arm() { itimer_ t{{0, 250}, {0, 250}}; return setitimer(0, &t, nullptr); }
