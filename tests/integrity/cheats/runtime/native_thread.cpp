// expect: T10.runtime.thread_started
// A native (non-Python) thread that keeps running after the call returns.
#include <atomic>
#include <chrono>
#include <thread>

static std::atomic<bool> g_stop{false};

extern "C" void start_background() {
  std::thread([] {
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }).detach();
}

extern "C" void stop_background() { g_stop = true; }
