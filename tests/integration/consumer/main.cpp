// A program built outside the urt tree against an installed urt (via its
// CMake package or via pkg-config), written as an Asio user would: Asio's
// classic API (io_context::post and io_context::work, which
// ASIO_NO_DEPRECATED removes) next to urt::executor. Starts a runtime, runs
// one spawned task and one coroutine at a priority through the executor,
// stops. Exits 0 only when all of it ran as asked.
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <urt/executor.hpp>
#include <urt/urt.hpp>

#include <atomic>
#include <cstdio>

// urt must not configure the consumer's Asio: no API-changing macro.
#if defined(ASIO_NO_DEPRECATED) || defined(ASIO_NO_TS_EXECUTORS)
#error "urt::urt and urt.pc must not define ASIO_NO_DEPRECATED or ASIO_NO_TS_EXECUTORS"
#endif

int main() {
  // The classic calls, as existing Asio code makes them.
  asio::io_context io;
  asio::io_context::work keep(io);
  bool classic = false;
  io.post([&] { classic = true; });
  io.poll();

  std::atomic<bool> ran{false};
  int coroutine_priority = -1;
  {
    urt::runtime rt{urt::runtime_options{}};
    rt.spawn(urt::task_spec{.priority = 10}, [&] { ran.store(true, std::memory_order_release); });
    const urt::executor ex = rt.executor({.priority = 42});
    auto body = []() -> urt::awaitable<int> {
      co_await urt::yield();
      co_return urt::this_task::priority();
    };
    coroutine_priority = asio::co_spawn(ex, body, asio::use_future).get();
    rt.stop();  // stop_mode::drain: runs every accepted task first
  }
  if (!classic || !ran.load(std::memory_order_acquire) || coroutine_priority != 42) {
    std::fprintf(stderr, "consumer: classic post %d, task %d, coroutine at priority %d (want 42)\n",
                 classic, ran.load(), coroutine_priority);
    return 1;
  }
  std::puts("consumer: the classic post, the task and the coroutine at priority 42 ran");
  return 0;
}
