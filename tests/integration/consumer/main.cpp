// A program built outside the urt tree against an installed urt (via its
// CMake package or via pkg-config): starts a runtime, runs one task, stops.
// Exits 0 only when the task ran.
#include <urt/urt.hpp>

#include <atomic>
#include <cstdio>

// urt's usage requirements (urt::urt, urt.pc's Cflags) must carry these, or
// the consumer sees different Asio types than the library was built with.
#if !defined(ASIO_STANDALONE) || !defined(ASIO_NO_DEPRECATED) || !defined(ASIO_NO_TS_EXECUTORS)
#error "urt::urt and urt.pc must define ASIO_STANDALONE ASIO_NO_DEPRECATED ASIO_NO_TS_EXECUTORS"
#endif

int main() {
  std::atomic<bool> ran{false};
  {
    urt::runtime rt{urt::runtime_options{}};
    rt.spawn(urt::task_spec{.priority = 10}, [&] { ran.store(true, std::memory_order_release); });
    rt.stop();  // stop_mode::drain: runs every accepted task first
  }
  if (!ran.load(std::memory_order_acquire)) {
    std::fputs("consumer: the task did not run\n", stderr);
    return 1;
  }
  std::puts("consumer: the task ran");
  return 0;
}
