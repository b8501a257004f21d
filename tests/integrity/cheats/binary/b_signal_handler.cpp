// expect: T10.binary.signal
extern "C" {
typedef void (*handler_t)(int);
handler_t signal(int, handler_t);
}
static void on_tick(int) {}
int arm() { return signal(14, on_tick) == nullptr; }
