// worker_counters: what a worker counts, read by stats(), placement and
// stop().
//
// Concurrency: every counter has one writer, named beside it, except
// accepted_remote and wake_yields (any spawning thread, read-modify-write).
// Single writers bump with a load and a store, no read-modify-write.
// bump_relaxed() is for pure statistics: a reader may see a stale value and
// nothing depends on it.
// bump_release() is for the counters a reader acquires to learn that a
// task's effects are visible (completed, cancelled, accepted_local: see
// worker::finished_acquire() and runtime.cpp's wait_quiescent()). Lines are
// split by writer, so that spawners do not miss on a line the worker
// rewrites after every task.
#pragma once

#include <atomic>
#include <cstdint>

namespace urt::detail {

struct worker_counters {
  /// A statistic: relaxed store; a stale read only shows an older count.
  static void bump_relaxed(std::atomic<std::uint64_t>& c, std::uint64_t by = 1) noexcept {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  /// A count a reader acquires: release store, pairing with that acquire
  /// load (named at each counter).
  static void bump_release(std::atomic<std::uint64_t>& c) noexcept {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Owner-written. Release (bump_release): completed and cancelled pair
  // with the acquire loads in worker::finished_acquire().
  alignas(64) std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> cancelled{0};
  // Owner-written statistics (bump_relaxed).
  std::atomic<std::uint64_t> exceptions{0};
  std::atomic<std::uint64_t> parks{0};           // parker
  std::atomic<std::uint64_t> doorbells_sent{0};  // balancer, or a task's remote spawn
  std::atomic<std::uint64_t> pushes{0};          // balancer
  std::atomic<std::uint64_t> pulls{0};           // balancer
  std::atomic<std::uint64_t> token_hops{0};      // balancer: hops this worker sent
  std::atomic<std::uint64_t> fallbacks{0};       // balancer: stuck hops it took over
  std::atomic<std::uint64_t> take_overs{0};      // stranded_watch: stuck inboxes it took in
  std::atomic<std::uint64_t> stuck_pulls{0};     // balancer: pulls from a worker still stuck
  std::atomic<std::uint64_t> resched_claims{0};  // reschedule requests it claimed (resched.hpp)
  std::atomic<std::uint64_t> quick_picks{0};     // tasks taken without a full step (quick_pick.hpp)
  std::atomic<std::uint64_t> io_rescued{0};      // io_watch: completions taken from stuck peers' reactors
  std::atomic<std::uint64_t> timer_spin_ns{0};   // parker: spun waiting for releases
  // Owner-written gauges (relaxed stores): the parker's adaptive values.
  std::atomic<std::int64_t> advance_ns{0};  // wake_advance::value()
  std::atomic<std::int64_t> window_ns{0};   // idle_window::value()

  // Owner-written, read by spawners: refreshed rarely, on a line of its own.
  // Relaxed: a hint for placement; the next refresh corrects a stale one.
  alignas(64) std::atomic<std::uint64_t> finished_hint{0};
  // Release (bump_release, and the un-count in worker): pairs with the
  // seq_cst load in worker::accepted_seq_cst(). Changes only with local spawns.
  std::atomic<std::uint64_t> accepted_local{0};

  // Written by spawners on other threads (seq_cst read-modify-write: pairs
  // with the seq_cst state store in stop(), runtime.cpp's shut_down): a line of
  // their own.
  alignas(64) std::atomic<std::uint64_t> accepted_remote{0};
  // Outside spawners that woke this worker on their own CPU and yielded it
  // (runtime_spawn.cpp, commit_spawn). Relaxed fetch_add: a statistic.
  std::atomic<std::uint64_t> wake_yields{0};
};

}  // namespace urt::detail
