// urt-pool-burst-bench: what a burst far bigger than the node pool costs
// and leaves behind. Each round queues --tasks empty tasks (default 10^6)
// from the main thread behind blocker tasks that hold every worker, then
// releases them and waits for the drain. It prints, per round, the
// process's resident memory (VmRSS) before, with the burst queued and
// after the drain, and the spawn cost in ns per task of the nodes the pool
// gave (the first node_pool::pool_cap of the burst, less what the magazines
// hold) against those past pool_cap, which came from the heap, as a ratio
// in the same round. The pool keeps at most pool_cap nodes (40 MiB), so the
// memory after the drain falls back near that however big the burst was.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "node_pool.hpp"
#include "urt/urt.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::atomic<bool> g_open{false};
std::atomic<unsigned> g_holding{0};
std::atomic<std::uint64_t> g_ran{0};

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t tasks = 1'000'000;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&](std::string_view flag, auto& out, auto lo, auto hi) {
      const std::string_view v = arg.substr(flag.size());
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || out < lo || out > hi) {
        std::fprintf(stderr,
                     "urt-pool-burst-bench: %.*s: \"%.*s\" is not an integer in %lld..%lld\n",
                     static_cast<int>(flag.size() - 1), flag.data(), static_cast<int>(v.size()),
                     v.data(), static_cast<long long>(lo), static_cast<long long>(hi));
        std::exit(2);
      }
    };
    if (arg.rfind("--tasks=", 0) == 0) {
      value("--tasks=", tasks, std::uint64_t{1}, std::uint64_t{100'000'000});
    } else if (arg.rfind("--rounds=", 0) == 0) {
      value("--rounds=", rounds, 1, 100);
    } else {
      std::fprintf(stderr, "usage: urt-pool-burst-bench [--tasks=N] [--rounds=N]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  namespace pool = urt::detail::node_pool;
  urt::runtime rt;
  const auto workers = static_cast<unsigned>(rt.worker_count());
  std::printf(
      "urt-pool-burst-bench: %llu empty tasks queued behind %u held workers, %d rounds; "
      "pool_cap %zu nodes of %zu bytes\n",
      static_cast<unsigned long long>(tasks), workers, rounds, pool::pool_cap,
      sizeof(urt::detail::task_node));
  std::printf("RSS at start: %.1f MiB\n", static_cast<double>(rss_kib()) / 1024);
  std::printf(
      "round  RSS MiB: before / queued / drained   spawn ns/task: pooled / past the cap "
      "(ratio)   heap nodes while queued\n");
  for (int r = 1; r <= rounds; ++r) {
    g_open = false;
    g_holding = 0;
    g_ran = 0;
    const long before = rss_kib();
    for (unsigned w = 0; w < workers; ++w) {
      rt.spawn(urt::task_spec{.priority = urt::priority_max, .affinity = urt::worker_set{w}}, [] {
        g_holding.fetch_add(1);
        while (!g_open.load(std::memory_order_acquire)) {
        }
      });
    }
    while (g_holding.load() < workers) {
    }
    // The nodes the pool can give: pool_cap less those the magazines hold
    // (the main thread's and the workers', at most 2 * pool_batch each);
    // past pool_cap every node comes from the heap. Timed apart.
    const std::uint64_t pooled =
        std::min<std::uint64_t>(tasks, pool::pool_cap - 2 * pool::pool_batch * (workers + 1));
    const auto spawn_some = [&](std::uint64_t n) {
      const auto t0 = clock_type::now();
      for (std::uint64_t i = 0; i < n; ++i) {
        rt.spawn(urt::task_spec{.priority = 1},
                 [] { g_ran.fetch_add(1, std::memory_order_relaxed); });
      }
      return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() /
             static_cast<double>(n == 0 ? 1 : n);
    };
    const double pooled_ns = spawn_some(pooled);
    const std::uint64_t rest = tasks - pooled;
    // The nodes between pooled and pool_cap may still be pooled: skip them.
    const std::uint64_t margin =
        std::min<std::uint64_t>(rest, 4 * pool::pool_batch * (workers + 1));
    spawn_some(margin);
    const double heap_ns = spawn_some(rest - margin);
    const long queued = rss_kib();
    const std::size_t heap_nodes = pool::shape().heap_nodes;
    g_open.store(true, std::memory_order_release);
    while (g_ran.load(std::memory_order_relaxed) < tasks) {
    }
    const long drained = rss_kib();
    std::printf("%5d  %7.1f / %6.1f / %7.1f                  %6.0f / %6.0f (%.2fx)        %zu\n", r,
                static_cast<double>(before) / 1024, static_cast<double>(queued) / 1024,
                static_cast<double>(drained) / 1024, pooled_ns, heap_ns,
                rest > margin ? heap_ns / pooled_ns : 0.0, heap_nodes);
  }
  rt.stop();
  const pool::depot_shape s = pool::shape();
  std::printf("pool after the rounds: %zu chunks of %zu nodes (at most %zu), %zu heap nodes left\n",
              s.chunks, pool::pool_batch, pool::pool_cap / pool::pool_batch, s.heap_nodes);
  return s.heap_nodes == 0 ? 0 : 1;
}
