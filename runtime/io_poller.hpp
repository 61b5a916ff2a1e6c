// io_poller: when a worker runs its io_context's reactor while it is busy.
//
// Each worker's io_context is the execution context of the executors made
// for it (urt/executor.hpp): sockets and timers created with them register
// with its reactor, and their completions are delivered there. A parked
// worker waits in that reactor (parker.hpp), so a completion wakes it like
// a doorbell. A busy worker never blocks in it, so the poller decides when
// it looks: at a scheduling point (between two tasks, in preempt_point(),
// in the idle spin), when I/O is outstanding and runtime_options::
// io_poll_interval has passed since the last poll. A poll is asio's
// io_context::poll(): one epoll_wait with a zero timeout, then the ready
// completions, each of which spawns its handler as a task at its
// executor's priority (that is all a completion does here), so nothing of
// the user's runs inside the poll and the tasks it made are picked in
// priority order with the rest.
//
// Whether a poll is worth its system call: with runtime_options::
// io_ready_ring the poller first reads its ready ring (ready_ring.hpp),
// which the kernel marks when the reactor's epoll descriptor has an event,
// and polls only when it is marked, or when quiet_poll_every intervals
// have passed since the last poll (what Asio queues without an event: an
// operation that completed as it was started, its completion queued in
// the io_context). A look at an unmarked ring counts as a look into the
// reactor (io_lease::looked): nothing waits there for a rescuer. After a
// poll that ran completions the next poll does not take the ring first:
// it stays marked, so that while completions keep coming the worker polls
// at each interval, as without the ring, with no io_uring_enter.
//
// "I/O outstanding" is Asio's own notion: an operation in flight holds an
// executor with outstanding_work.tracked, and such executors count
// themselves here (work_started/work_finished). No tracked executor: no
// clock read and no syscall at a scheduling point, so a runtime without
// sockets pays one relaxed load per scheduling point.
//
// Concurrency:
//   - work_started() / work_finished(): any thread (a tracked executor is
//     copied and destroyed wherever Asio moves its operation). The count is
//     relaxed: it decides whether the owner polls, and where it parks; for
//     the latter the increment that leaves 0 is followed by a ring, whose
//     seq_cst fence pairs with the parker's announcement (doorbell.hpp). An operation is
//     registered with the reactor on the thread that starts it, before its
//     completion can exist, and a count that reaches the owner late only
//     delays the first poll to the next scheduling point that sees it.
//   - rescue(): any thread, when the owner has not looked into its reactor
//     for a while (io_rescue.hpp); it and the owner's own polls and parked
//     waits share the context through the lease (io_rescue.hpp).
//   - the statistics (polls, handlers, ring_skips, ring_error): the owner
//     writes them, any thread reads them, relaxed.
//   - everything else: the owner only.
#pragma once

#include <asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "io_rescue.hpp"
#include "ready_ring.hpp"
#include "urt/options.hpp"
#include "urt/timer.hpp"

namespace urt::detail {

class io_poller {
 public:
  struct config {
    std::chrono::nanoseconds interval{0};
    bool ready_ring = false;
    static config from(const runtime_options& o) noexcept {
      return {o.io_poll_interval, o.io_ready_ring};
    }
  };
  /// With the ready ring, a poll at least this many intervals after the
  /// last one, marked or not. What Asio queued without an event waits
  /// that long at most while the worker stays busy; the polls it costs
  /// are an eighth of the interval's (bench/README.md, "urt-io-poll-bench:
  /// the ready ring").
  static constexpr int quiet_poll_every = 8;

  io_poller(asio::io_context& io, config cfg) noexcept : io_(io), cfg_(cfg) {}

  /// Any thread: an executor tracking outstanding work on this worker's
  /// context was made / destroyed. work_started() returns true when the
  /// count left 0: the owner may be parked on its futex, where no
  /// completion reaches it, and must be rung (worker::count_io_work).
  bool work_started() noexcept { return work_.fetch_add(1, std::memory_order_relaxed) == 0; }
  void work_finished() noexcept { work_.fetch_sub(1, std::memory_order_relaxed); }
  /// Tracked executors alive now (a statistic; racy by design).
  [[nodiscard]] std::int64_t outstanding() const noexcept {
    return work_.load(std::memory_order_relaxed);
  }

  /// Owner, at a scheduling point at `now`, I/O outstanding: polls the
  /// reactor when the interval has passed since the last poll (or a parked
  /// wait left completions behind). Returns the handlers it ran (each
  /// spawned a task here or elsewhere). Exceptions from them propagate.
  std::size_t at_scheduling_point(clock::time_point now) {
    if (!poll_soon_ && now - last_ < cfg_.interval) return 0;
    if (!poll_soon_ && !ring_.signalled() && now - last_ < quiet_poll_every * cfg_.interval) {
      lease_.looked(now);
      skips_.store(skips_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return 0;
    }
    // Never fails: only the owner holds it exclusively, and not here.
    if (!lease_.try_share()) return 0;
    const io_lease::shared hold(lease_);
    return poll(now);
  }
  /// Any thread but the owner: polls the reactor for an owner that has not
  /// looked into it for a while (io_rescue.hpp), unless the owner is parked
  /// in it. Returns the handlers it ran; exceptions from them propagate.
  std::size_t rescue();
  /// Owner thread, once its reactor exists: opens the ready ring when the
  /// options ask for it (ready_ring.hpp). Whether the ring is in use.
  bool open_ready_ring();
  /// Owner: closes it (before the io_context goes).
  void close_ready_ring() noexcept { ring_.close(); }
  /// Any thread: when the owner last looked into its reactor (io_lease).
  [[nodiscard]] clock::time_point last_look() const noexcept { return lease_.last_look(); }
  /// The right to run the io_context (io_rescue.hpp): the owner's parked
  /// wait takes it too.
  [[nodiscard]] io_lease& lease() noexcept { return lease_; }
  /// Owner, after a parked wait that ran a handler other than the doorbell
  /// or the alarm: more completions may be queued behind it; the next
  /// scheduling point takes them in whatever the interval.
  void after_parked_completion() noexcept {
    poll_soon_ = true;
    handlers_.store(handlers_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// Reactor polls at scheduling points, and the completions taken in by
  /// them and by parked waits (owner writes, anyone reads).
  [[nodiscard]] std::uint64_t polls() const noexcept { return polls_.load(std::memory_order_relaxed); }
  /// Polls skipped because the ready ring was not marked (owner writes,
  /// anyone reads).
  [[nodiscard]] std::uint64_t ring_skips() const noexcept {
    return skips_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t handlers() const noexcept {
    return handlers_.load(std::memory_order_relaxed);
  }
  /// Why the ready ring is off (worker_stats::io_ring_error): an errno
  /// value, -1 without one, 0 while it is in use or not asked for (owner
  /// writes when the ring opens or the kernel ends it, anyone reads).
  [[nodiscard]] int ring_error() const noexcept {
    return ring_error_.load(std::memory_order_relaxed);
  }

 private:
  std::size_t poll(clock::time_point now);

  asio::io_context& io_;
  const config cfg_;
  clock::time_point last_{};
  bool poll_soon_ = false;
  bool flowing_ = false;  // the last poll ran completions: the next one takes no ring
  ready_ring ring_;  // inactive unless open_ready_ring() opened it
  std::atomic<std::uint64_t> polls_{0};
  std::atomic<std::uint64_t> handlers_{0};
  std::atomic<std::uint64_t> skips_{0};
  std::atomic<int> ring_error_{0};
  io_lease lease_;
  // Its own line: written by tracked executors on any thread, read by the
  // owner at every scheduling point.
  alignas(64) std::atomic<std::int64_t> work_{0};
};

}  // namespace urt::detail
