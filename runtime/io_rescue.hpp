// io_rescue: I/O completions waiting in the reactor of a worker that takes
// no scheduling point. A worker takes its own completions in only at its
// scheduling points (io_poller.hpp); one stuck in a long task, or simply
// not running because the OS gave its CPU to another thread (a shared
// machine: urt-kv beside redis-benchmark on the same CPUs), leaves every
// socket it is home to waiting, however idle the other workers are. The
// kernel never has this problem (any CPU runs a woken task); asio's
// thread_pool neither (any thread polls its one reactor). Here an idle
// worker polls such a worker's reactor for it: each completion spawns its
// handler's task from the rescuer, so a handler whose executor allows the
// rescuer runs there at once, and one kept to its home by its affinity
// goes to the home's inbox (where the stranded watch can take it in).
//
// io_lease (one per worker, in its io_poller): the right to run the
// worker's io_context. Asio would let two threads poll one context at
// once, but the owner's parked wait must see the completion that ends it
// (the doorbell's, the alarm's) and the parker's wakeup_fds are owner
// state their handlers write: so exactly one thread is ever inside the
// context, the owner or one rescuer.
//   - the owner: try_acquire() for a poll at a scheduling point (a rescuer
//     holding it is polling for it: skip the poll); acquire() (spins; a
//     rescuer holds it for one zero-timeout poll) for its parked wait in
//     the reactor, for arming and disarming the parker, and at exit.
//   - a rescuer: try_acquire() only; it never waits for an owner.
//   - looked(now): the owner, holding the lease, after each look into its
//     reactor (a poll, or the end of a parked wait); last_look() any
//     thread. Relaxed: a stale value only moves a rescue by one idle pass.
//   Acquire/release: the acquire exchange in try_acquire() pairs with the
//   release store in release() of the previous holder, so everything the
//   previous holder did in the context (and the handlers it ran, which
//   write the parker's wakeup_fds) happens before the next holder's use.
//
// io_watch (one per worker, owner only): before parking, an idle worker
// looks at up to `span` other workers, from where its last look ended. A
// candidate has I/O outstanding and is not parking (a parked worker waits
// in its reactor, and the kernel wakes it for a completion). A candidate
// whose last look is `patience` old or older is rescued now, one per idle
// pass; for the others the watch returns when they would be, and the
// worker's parker wakes it then to look again. After a rescue the look
// starts at the rescued worker, and the rescuer looks again `recheck`
// (io_poll_interval) later, at the latest: a worker that stays stuck is
// polled by its rescuer as often as it would poll itself, until it looks
// again. Patience is io_poll_interval + ipi_timeout: past the longest a
// running owner takes between two polls, by the stuck-worker fallback's
// timeout.
//
// io_peers: what the watch needs of the other workers; the runtime
// implements it over its workers, a unit test over made-up peers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "spinlock.hpp"
#include "urt/timer.hpp"

namespace urt::detail {

class io_lease {
 public:
  /// Any thread: takes the lease if it is free.
  bool try_acquire() noexcept {
    // Relaxed pre-check: a rescuer that finds it held leaves the line alone.
    // Acquire: pairs with the release store in release() (see the top).
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  /// Owner: takes the lease, waiting for a rescuer's poll to end.
  void acquire() noexcept {
    while (!try_acquire()) cpu_relax();
  }
  /// The holder: gives it back. Release: pairs with try_acquire().
  void release() noexcept { held_.store(false, std::memory_order_release); }

  /// Owner, holding the lease: it looked into its reactor at `now`.
  void looked(clock::time_point now) noexcept {
    last_look_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }
  /// Any thread: the owner's last look (relaxed; see the top).
  [[nodiscard]] clock::time_point last_look() const noexcept {
    return clock::time_point(clock::duration(last_look_ns_.load(std::memory_order_relaxed)));
  }

  /// Releases on scope exit a lease taken by the caller.
  class held {
   public:
    explicit held(io_lease& l) noexcept : l_(l) {}
    held(const held&) = delete;
    held& operator=(const held&) = delete;
    ~held() { l_.release(); }

   private:
    io_lease& l_;
  };

 private:
  // Its own line: rescuers read it while the owner writes its other lines.
  alignas(64) std::atomic<bool> held_{false};
  std::atomic<clock::rep> last_look_ns_{0};
};

class io_peers {
 public:
  /// What the watch sees of a worker.
  struct state {
    bool candidate = false;  // I/O outstanding and not parking
    clock::time_point last_look{};
  };
  virtual ~io_peers() = default;
  [[nodiscard]] virtual unsigned worker_count() const noexcept = 0;
  /// Any thread: worker w as it is now (hints; see the top).
  [[nodiscard]] virtual state look(unsigned w) const noexcept = 0;
  /// Polls worker w's reactor for it if its lease is free; returns the
  /// completions taken in (each spawned its handler from the caller). An
  /// exception from a spawn (no memory) propagates, the lease given back.
  virtual std::size_t rescue(unsigned w) = 0;
};

class io_watch {
 public:
  static constexpr unsigned none = ~0U;
  static constexpr unsigned default_span = 8;

  /// What the watch decided before the worker parks.
  struct plan {
    unsigned rescue = none;  // poll this worker's reactor for it now
    clock::time_point check = clock::time_point::max();  // else wake then and look again
  };

  /// `patience` and `recheck` are at most runtime_options::max_wait.
  io_watch(unsigned self, std::chrono::nanoseconds patience, std::chrono::nanoseconds recheck,
           unsigned span = default_span) noexcept
      : self_(self), patience_(patience), recheck_(recheck), span_(span == 0 ? 1 : span) {}

  /// Owner, idle, about to park, at `now`.
  [[nodiscard]] plan before_idle(const io_peers& peers, clock::time_point now) noexcept;

 private:
  const unsigned self_;
  const std::chrono::nanoseconds patience_;
  const std::chrono::nanoseconds recheck_;
  const unsigned span_;
  unsigned next_ = 0;  // the first worker the next look visits
};

}  // namespace urt::detail
