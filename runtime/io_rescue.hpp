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
// goes to the home's inbox (where the stranded watch can take it in). The
// tasks the stuck worker's own polls spawned wait in its run queue as long:
// the rescuer also pulls one of them per rescue (worker::idle).
// Completions of one worker may so be handled on two threads at once, as
// with any io_context that several threads run: handlers that share state
// need a strand (urt-kv gives each connection one).
//
// io_lease (one per worker, in its io_poller): who may run the worker's
// io_context. Asio lets threads poll one context at once, and any number
// of polls may run together (shared holds): the owner's own polls at its
// scheduling points and rescuers' polls. Only the owner's parked wait is
// exclusive (with arming and disarming the parker, and its exit): the
// wait must see the completion that ends it (the doorbell's, the alarm's)
// and the parker's wakeup_fds are owner state their handlers write.
// Exclusive waits out the shared holds; no shared hold begins while the
// owner holds it exclusively.
//   - try_share() / unshare(): any thread; never waits. The owner's own
//     polls always get it (nobody else holds it exclusively).
//   - lock() / unlock(): the owner only; lock() waits for the polls inside
//     to end (one zero-timeout epoll_wait and the spawns of its handlers).
//   - looked(now): the owner, after each look into its reactor (a poll, or
//     the end of a parked wait); last_look() any thread. Relaxed: a stale
//     value only moves a rescue by one idle pass.
//   Ordering: try_share()'s acquire CAS pairs with unlock()'s release store;
//   lock()'s acquire loads pair with unshare()'s release decrements. So
//   everything a rescuer did in the context (the handlers it ran, which may
//   write the parker's wakeup_fds) happens before the owner's next
//   exclusive hold, and the owner's exclusive hold before the next
//   rescuer's poll.
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
// timeout. A busy worker with I/O of its own looks too, from its reactor
// polls (while_busy()): at most every `patience` / 2 and at up to
// `busy_span` peers, rescuing one stale candidate per look. Without it a
// server whose workers were all busy (urt-kv running KEYS on every worker,
// the OS sharing their CPUs with other processes) left the connections of
// a worker the OS had switched out waiting for that worker's next time
// slice, milliseconds, while its peer, on a CPU, looked only into its own
// reactor (bench/README.md, "compare-redis, shared layout: a busy
// worker's look"). A worker without I/O of its own reads no clock at its
// scheduling points, and so looks only when idle. A worker that parked
// while its peers were parked too (no candidate, so no deadline) does not
// notice a peer that gets stuck afterwards until something wakes it (a
// task, a timer, its own I/O). A rescue is sure while some worker keeps
// coming back to idle or polling its own reactor, as under load; on a
// quiet runtime it is not (a periodic look by parked workers would cost
// every idle worker wake-ups forever).
//
// io_peers: what the watch needs of the other workers; the runtime
// implements it over its workers, a unit test over made-up peers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "function_ref.hpp"
#include "spinlock.hpp"
#include "urt/timer.hpp"

namespace urt::detail {

class io_lease {
 public:
  /// Any thread: a shared hold (a poll), unless the owner holds it
  /// exclusively.
  bool try_share() noexcept {
    std::uint32_t v = state_.load(std::memory_order_relaxed);
    do {
      if ((v & exclusive_bit) != 0) return false;
      // Acquire: pairs with the release store in unlock().
    } while (!state_.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
                                           std::memory_order_relaxed));
    return true;
  }
  /// The shared holder: ends its hold. Release: pairs with lock()'s loads.
  void unshare() noexcept { state_.fetch_sub(1, std::memory_order_release); }
  /// Owner: an exclusive hold; waits for the shared holds inside to end.
  void lock() noexcept {
    // Acquire (both): pair with the release decrements in unshare().
    state_.fetch_or(exclusive_bit, std::memory_order_acquire);
    while ((state_.load(std::memory_order_acquire) & ~exclusive_bit) != 0) cpu_relax();
  }
  /// Owner: ends its exclusive hold. Release: pairs with try_share().
  void unlock() noexcept { state_.store(0, std::memory_order_release); }

  /// Owner: it looked into its reactor at `now`.
  void looked(clock::time_point now) noexcept {
    last_look_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }
  /// Any thread: the owner's last look (relaxed; see the top).
  [[nodiscard]] clock::time_point last_look() const noexcept {
    return clock::time_point(clock::duration(last_look_ns_.load(std::memory_order_relaxed)));
  }

  /// Ends on scope exit a shared hold the caller got.
  class shared {
   public:
    explicit shared(io_lease& l) noexcept : l_(l) {}
    shared(const shared&) = delete;
    shared& operator=(const shared&) = delete;
    ~shared() { l_.unshare(); }

   private:
    io_lease& l_;
  };
  /// The owner's exclusive hold for a scope.
  class exclusive {
   public:
    explicit exclusive(io_lease& l) noexcept : l_(l) { l_.lock(); }
    exclusive(const exclusive&) = delete;
    exclusive& operator=(const exclusive&) = delete;
    ~exclusive() { l_.unlock(); }

   private:
    io_lease& l_;
  };

 private:
  static constexpr std::uint32_t exclusive_bit = 1U << 31;
  // Its own line: rescuers write it while the owner writes its other lines.
  alignas(64) std::atomic<std::uint32_t> state_{0};  // exclusive_bit | shared holds
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
  /// Peers a busy worker's look visits at most (while_busy()): it pays for
  /// them between its own tasks.
  static constexpr unsigned busy_span = 2;

  /// What the watch decided before the worker parks.
  struct plan {
    unsigned rescue = none;  // poll this worker's reactor for it now
    clock::time_point check = clock::time_point::max();  // else wake then and look again
  };

  /// `patience` and `recheck` are at most runtime_options::max_wait.
  io_watch(unsigned self, std::chrono::nanoseconds patience, std::chrono::nanoseconds recheck,
           unsigned span = default_span) noexcept
      : self_(self), patience_(patience), recheck_(recheck), span_(span == 0 ? 1 : span) {}

  /// Owner, idle, about to park.
  /// `now` is read once, at the first candidate: with no I/O outstanding
  /// on the peers looked at, the look reads no clock.
  [[nodiscard]] plan before_idle(const io_peers& peers,
                                 function_ref<clock::time_point()> now) noexcept;
  /// The same at a given time (unit tests).
  [[nodiscard]] plan before_idle(const io_peers& peers, clock::time_point now) noexcept {
    return before_idle(peers, [now] { return now; });
  }
  /// Owner, busy, at a reactor poll of its own at `now`: when `patience` /
  /// 2 has passed since its last busy look, looks at up to busy_span peers
  /// (from where the last look of either kind ended) and names a stale one
  /// to rescue; `check` is unused. Otherwise looks at nobody.
  /// Inline: it runs at every scheduling point of a worker with I/O, and
  /// almost always only compares the time.
  [[nodiscard]] plan while_busy(const io_peers& peers, clock::time_point now) noexcept {
    return now < next_busy_look_ ? plan{} : busy_look(peers, now);
  }

 private:
  // while_busy() when a look is due.
  plan busy_look(const io_peers& peers, clock::time_point now) noexcept;
  // Visits up to `span` peers from next_ (see before_idle()).
  plan look(const io_peers& peers, function_ref<clock::time_point()> read_clock,
            unsigned span) noexcept;

  const unsigned self_;
  const std::chrono::nanoseconds patience_;
  const std::chrono::nanoseconds recheck_;
  const unsigned span_;
  unsigned next_ = 0;  // the first worker the next look visits
  clock::time_point next_busy_look_{};  // while_busy() looks again from then
};

}  // namespace urt::detail
