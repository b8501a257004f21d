// expect: T12.cpp.static_cache
namespace {
int g_calls = 0;
}
bool profiling_phase() { return ++g_calls > 5; }
