// stranded: remote spawns left in the inbox of a worker that reaches no
// scheduling point (its task is stuck in a long loop). The kernel would
// preempt that CPU for an urgent wake-up; urt cannot, and a node in an
// inbox is in no run queue and in no overload mask, so neither a pull nor
// the push token's fallback could reach it: it waited for the stuck task.
// Here an idle worker takes such an inbox into its owner's run queue for
// it, where pulls and pushes see the tasks, and pulls one.
//
// stranded_marks (one per runtime): a byte per worker, "a remote spawn went
// into this worker's inbox while it was not parked", on per-LLC cache lines
// and written with plain stores (no RMW on a line other workers share), and
// a count of each worker's scheduling points.
//   - mark(w): the spawner, after its push into w's inbox, when its ring
//     found w not parking (a parked worker is woken by the ring and drains
//     its inbox itself).
//   - point(w, pending): the owner, at each scheduling point after it took
//     nodes out of its inbox (under its queue lock): counts the point and
//     clears the mark once the inbox is empty.
//   - any(), next(), points(): any thread (an idle worker's watch).
// The mark is never clear while a node sits in the inbox of a worker that
// takes no more scheduling points (a Dekker pair): the spawner's enqueue,
// the inbox's level bit and its ring's seq_cst fence come before its load
// of the mark; the owner clears the mark, then a seq_cst fence, then it
// loads the inbox's pending state. Either the owner's load sees the node and
// keeps the mark, or the spawner's load sees the mark cleared and sets it.
// A mark may be set with the inbox empty (the owner drained it between
// the spawner's push and its mark): it costs a watcher one look, and the
// owner clears it at its next scheduling point.
//
// stranded_watch (one per worker, owner only): before parking, an idle
// worker looks at one marked worker; it notes that worker's point count
// and looks again ipi_timeout later (the parker wakes it then). If the
// count has not moved and the mark is still set, the worker has taken no
// scheduling point for all that time with nodes in its inbox: the watcher
// takes them in for it (worker::take_in_for_peer, under that worker's
// lock), and again at most once per ipi_timeout while it stays stuck. A
// worker that keeps taking scheduling points is never taken over, however
// long its backlog: a busy worker's inbox is taken in by its owner alone,
// a batch per step, most urgent first (inbox.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "llc_bytes.hpp"
#include "urt/timer.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class stranded_marks {
 public:
  static constexpr unsigned none = ~0U;

  /// Marks for `workers` (dense ids, each LLC a contiguous id range, as
  /// urt::topology produces): a byte per worker, each LLC's on cache lines
  /// of its own, as the overload mask lays them out, so that spawners and
  /// owners in one LLC never write a line another LLC's workers use.
  explicit stranded_marks(std::span<const worker_place> workers);
  /// `workers` workers in one LLC (unit tests).
  explicit stranded_marks(unsigned workers);

  /// Spawner, after its push into w's inbox and its ring (whose seq_cst
  /// fence orders the push before this load): marks w unless it is marked.
  /// A plain byte store, no RMW: two spawners storing 1 agree.
  void mark(unsigned w) noexcept {
    std::atomic<std::uint8_t>& m = flag(w);
    // Relaxed: the ring's fence is the spawner's half of the Dekker pair
    // with point()'s clear (see the top).
    if (m.load(std::memory_order_relaxed) == 0) m.store(1, std::memory_order_relaxed);
  }

  /// Owner of w, at a scheduling point, after taking nodes out of its
  /// inbox: counts the point; clears w's mark once `inbox_pending()` says
  /// the inbox is empty, and looks once more after the clear.
  template <class Pending>
  void point(unsigned w, Pending&& inbox_pending) noexcept {
    slot& s = slots_[w];
    s.points.store(s.points.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic<std::uint8_t>& m = flag(w);
    if (m.load(std::memory_order_relaxed) == 0 || inbox_pending()) return;
    m.store(0, std::memory_order_relaxed);
    // The owner's half of the Dekker pair with mark(): pairs with the
    // seq_cst fence of the spawner's doorbell::ring() (see the top).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (inbox_pending()) m.store(1, std::memory_order_relaxed);  // a push came in meanwhile
  }

  /// Any thread: whether any worker is marked (relaxed: a hint for the
  /// watch, which re-reads the mark before it acts). Reads every line: an
  /// idle worker's look before it parks, never a spawn's.
  [[nodiscard]] bool any() const noexcept;
  /// Any thread: whether w is marked.
  [[nodiscard]] bool marked(unsigned w) const noexcept {
    return flag(w).load(std::memory_order_relaxed) != 0;
  }
  /// Any thread: the first marked worker after `after` other than `self`,
  /// wrapping around, or none.
  [[nodiscard]] unsigned next(unsigned after, unsigned self) const noexcept;
  /// Any thread: w's scheduling points so far (relaxed: only compared with
  /// an earlier reading of the same counter).
  [[nodiscard]] std::uint64_t points(unsigned w) const noexcept {
    return slots_[w].points.load(std::memory_order_relaxed);
  }
  [[nodiscard]] unsigned worker_count() const noexcept { return n_; }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> points{0};  // owner writes; a line of its own
  };
  [[nodiscard]] std::atomic<std::uint8_t>& flag(unsigned w) const noexcept { return marks_[w]; }

  unsigned n_ = 0;
  llc_bytes marks_;  // per-LLC lines (llc_bytes.hpp); 0: not marked
  std::unique_ptr<slot[]> slots_;
};

/// How a watcher takes a stuck worker's inbox in: the runtime implements it
/// over its workers (worker::take_in_for_peer), a unit test with a recorder.
class stranded_peers {
 public:
  virtual ~stranded_peers() = default;
  /// Moves worker w's untimed inbox nodes of levels above `above` into its
  /// run queue (-1: of every level); how many.
  virtual std::size_t take_in(unsigned w, int above) noexcept = 0;
};

class stranded_watch {
 public:
  /// What the watch decided before the worker parks.
  struct plan {
    unsigned take_over = stranded_marks::none;  // take this worker's inbox in now
    clock::time_point check = clock::time_point::max();  // else wake then and look again
  };

  stranded_watch(unsigned self, std::chrono::nanoseconds patience) noexcept
      : self_(self), patience_(patience) {}

  /// Owner, idle, about to park, at `now`.
  [[nodiscard]] plan before_idle(const stranded_marks& marks, clock::time_point now) noexcept;

 private:
  const unsigned self_;
  const std::chrono::nanoseconds patience_;
  unsigned watched_ = stranded_marks::none;
  std::uint64_t watched_points_ = 0;
  clock::time_point due_{};
};

}  // namespace urt::detail
