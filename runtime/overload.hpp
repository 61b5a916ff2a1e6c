// overload: which workers are overloaded, and the push token that visits
// them (kernel/sched/rt.c: rto_mask, rto_count, tell_cpu_to_push,
// rto_next_cpu, rto_push_irq_work_func).
//
// A worker is overloaded exactly when it has a queued task that could run on
// another worker (invariant 4). overload_mask publishes that, sharded like
// cpupri's default layout: per last-level cache, a byte per worker on cache
// lines of that LLC, written with a plain release store by whoever holds
// the worker's queue lock. The byte holds the priority of the worker's most
// urgent pushable task (0 = not overloaded), so that a worker about to run
// a lower task can see that a more urgent one waits elsewhere: with
// cooperative tasks that cannot be preempted, it must wait for the push
// (or pull) before it commits to its own task, where the kernel would let
// the pushed task preempt it. A count of overloaded workers (the
// kernel's rto_count) lets a worker that lowers its priority skip the scan
// in the common case where nobody is overloaded; it changes only when a
// worker enters or leaves overload, never per task.
//
// push_token: one per runtime (the kernel's root domain rto_* fields). A
// worker that lowers its priority while some worker is overloaded calls
// request(): it bumps the request counter and, when the token is at rest,
// starts it towards the next overloaded worker. The holder pushes what it
// can at its next scheduling point and calls forward(), which names the
// next overloaded worker after it, never the holder itself; after the last
// one, the token starts one more round when requests arrived while it
// travelled, else it comes to rest. In user space a doorbell cannot
// interrupt a running task, so a holder stuck in a long task would keep the
// token forever; take_over_stuck() lets a requester take the hop over once
// it is older than a timeout (the runtime then pulls one task from the stuck
// worker and sends the token on).
//
// Concurrency:
//   - overload_mask::set(w) only under w's queue lock (one writer at a
//     time per worker); next(), test(), any() from any thread, wait-free.
//   - push_token: request(), forward() and take_over_stuck() from any
//     thread; they serialise on the token's own lock (held for one scan of
//     the mask). request() first tries the start flag, so concurrent
//     requesters while the token travels cost one RMW each and never wait.
//     hop_deadline() reads without the lock.
// The token does bounded work per call: one scan of the mask per round, and
// a round starts again only when the request counter moved.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "llc_bytes.hpp"
#include "spinlock.hpp"
#include "urt/worker_set.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class overload_mask {
 public:
  static constexpr unsigned none = max_workers;

  /// Builds the mask for `workers` (dense ids, each LLC a contiguous id
  /// range, as urt::topology produces), nobody overloaded.
  explicit overload_mask(std::span<const worker_place> workers);
  overload_mask(const overload_mask&) = delete;
  overload_mask& operator=(const overload_mask&) = delete;

  /// Under w's queue lock: w's most urgent pushable task now has priority
  /// `top` (0..99), or w has none (`top` < 0: not overloaded).
  void set(unsigned w, int top) noexcept;
  /// Whether w is overloaded (acquire: pairs with the store in set()).
  [[nodiscard]] bool test(unsigned w) const noexcept { return top(w) >= 0; }
  /// w's most urgent pushable priority, or -1 (acquire, as test()).
  [[nodiscard]] int top(unsigned w) const noexcept;
  /// The overloaded worker other than `self` whose most urgent pushable
  /// task is the most urgent of all and above `level`, or `none`.
  [[nodiscard]] unsigned best_above(int level, unsigned self) const noexcept;
  /// Whether any worker is overloaded. Acquire: pairs with the count RMW
  /// in set(), so a caller that sees the count sees the flag behind it.
  [[nodiscard]] bool any() const noexcept { return count_.load(std::memory_order_acquire) != 0; }
  /// The first overloaded worker with an id above `after` (`none` for
  /// "from the start"), or `none` (kernel: cpumask_next on rto_mask).
  [[nodiscard]] unsigned next(unsigned after) const noexcept;
  [[nodiscard]] unsigned worker_count() const noexcept { return n_; }

 private:
  static std::span<const worker_place> checked(std::span<const worker_place> workers);
  [[nodiscard]] std::atomic<std::uint8_t>& flag(unsigned w) const noexcept { return flags_[w]; }

  unsigned n_ = 0;
  llc_bytes flags_;  // per-LLC lines (llc_bytes.hpp)
  alignas(64) std::atomic<unsigned> count_{0};
};

class push_token {
 public:
  static constexpr unsigned none = overload_mask::none;

  /// One doorbell to ring: `target` is asked to push and forward the token;
  /// `seq` identifies the hop (target none: nobody to ring).
  struct hop {
    unsigned target = none;
    std::uint64_t seq = 0;
  };
  /// A hop taken over from a stuck worker: pull from `stuck`, ring `next`.
  struct takeover {
    unsigned stuck = none;
    hop next;
  };

  /// `self` lowered its priority while some worker is overloaded (the
  /// kernel's tell_cpu_to_push). Returns the first hop when this call
  /// started the token, else target none (the request is then served by
  /// one more round of the travelling token). `now_ns` stamps the hop.
  hop request(unsigned self, const overload_mask& mask, std::int64_t now_ns) noexcept;
  /// `self` was rung for hop `seq` and has pushed: the next hop, never to
  /// `self`, or target none when the token comes to rest, or when the hop
  /// had been taken over meanwhile (then whoever took it sends it on).
  hop forward(unsigned self, std::uint64_t seq, const overload_mask& mask,
              std::int64_t now_ns) noexcept;
  /// When the pending hop was sent at least `timeout_ns` before `now_ns` to
  /// a worker other than `self`, takes it over: the stuck worker and the
  /// next hop (sent by `self`, never to `self`). Otherwise stuck == none.
  takeover take_over_stuck(unsigned self, const overload_mask& mask, std::int64_t now_ns,
                           std::int64_t timeout_ns) noexcept;

  /// When the pending hop times out (sent + timeout), or INT64_MAX when the
  /// token is at rest. Relaxed: a stale answer only moves one wake-up.
  [[nodiscard]] std::int64_t hop_deadline(std::int64_t timeout_ns) const noexcept;
  /// The worker the pending hop was sent to, or none when at rest.
  [[nodiscard]] unsigned holder() const noexcept {
    return hop_target_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] bool travelling() const noexcept { return holder() != none; }

 private:
  // Under lock_: the next overloaded worker after pos_, skipping `sender`;
  // restarts a round while requests arrived (kernel: rto_next_cpu).
  unsigned next_target(unsigned sender, const overload_mask& mask) noexcept;
  // Under lock_: records and returns the hop to `target` (or the rest state).
  hop send(unsigned target, std::int64_t now_ns) noexcept;

  // Bumped by every request (kernel: rto_loop_next); read under lock_.
  alignas(64) std::atomic<std::uint64_t> requests_{0};
  // Held by the requester that may start the token (kernel: rto_loop_start).
  std::atomic<bool> starting_{false};
  spinlock lock_;                 // kernel: rto_lock
  unsigned pos_ = none;           // under lock_: last worker sent to this round (rto_cpu)
  std::uint64_t rounds_seen_ = 0; // under lock_: requests_ at the last round start (rto_loop)
  std::uint64_t seq_ = 0;         // under lock_: hops sent so far
  // The pending hop. Written under lock_; read without it by hop_deadline()
  // and holder() (relaxed: hints that decide when to look again).
  std::atomic<unsigned> hop_target_{none};
  std::atomic<std::int64_t> hop_sent_ns_{0};
};

}  // namespace urt::detail
