// stranded: remote spawns left in the inbox of a worker that reaches no
// scheduling point (its task is stuck in a long loop). The kernel would
// preempt that CPU for an urgent wake-up; urt cannot, and a node in an
// inbox is in no run queue and in no overload mask, so neither a pull nor
// the push token's fallback could reach it: it waited for the stuck task.
// Here an idle worker takes such an inbox into its owner's run queue for
// it, where pulls and pushes see the tasks, and pulls one.
//
// stranded_marks (one per runtime): a bit per worker, "a remote spawn went
// into this worker's inbox while it was not parked", and a count of each
// worker's scheduling points.
//   - mark(w): the spawner, after its push into w's inbox, when its ring
//     found w not parking (a parked worker is woken by the ring and drains
//     its inbox itself).
//   - point(w, pending): the owner, at each scheduling point after it took
//     nodes out of its inbox (under its queue lock): counts the point and
//     clears the bit once the inbox is empty.
//   - any(), next(), points(): any thread (an idle worker's watch).
// The bit is never clear while a node sits in the inbox of a worker that
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
// lock), and again at most once per ipi_timeout while it stays stuck. A worker that keeps taking scheduling points is
// never taken over, however long its backlog, so a busy worker's inbox
// stays its own, as the single-dequeuer inbox expects.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "urt/timer.hpp"

namespace urt::detail {

class stranded_marks {
 public:
  static constexpr unsigned none = ~0U;

  explicit stranded_marks(unsigned workers);

  /// Spawner, after its push into w's inbox and its ring (whose seq_cst
  /// fence orders the push before this load): marks w unless it is marked.
  void mark(unsigned w) noexcept {
    std::atomic<std::uint64_t>& word = words_[w / 64];
    const std::uint64_t bit = std::uint64_t{1} << (w % 64);
    // Relaxed: the ring's fence is the spawner's half of the Dekker pair
    // with point()'s clear (see the top).
    if ((word.load(std::memory_order_relaxed) & bit) == 0) word.fetch_or(bit, std::memory_order_relaxed);
  }

  /// Owner of w, at a scheduling point, after taking nodes out of its
  /// inbox: counts the point; clears w's mark once `inbox_pending()` says
  /// the inbox is empty, and looks once more after the clear.
  template <class Pending>
  void point(unsigned w, Pending&& inbox_pending) noexcept {
    slot& s = slots_[w];
    s.points.store(s.points.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic<std::uint64_t>& word = words_[w / 64];
    const std::uint64_t bit = std::uint64_t{1} << (w % 64);
    if ((word.load(std::memory_order_relaxed) & bit) == 0 || inbox_pending()) return;
    word.fetch_and(~bit, std::memory_order_relaxed);
    // The owner's half of the Dekker pair with mark(): pairs with the
    // seq_cst fence of the spawner's doorbell::ring() (see the top).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (inbox_pending()) word.fetch_or(bit, std::memory_order_relaxed);  // a push came in meanwhile
  }

  /// Any thread: whether any worker is marked (relaxed: a hint for the
  /// watch, which re-reads the mark before it acts).
  [[nodiscard]] bool any() const noexcept;
  /// Any thread: whether w is marked.
  [[nodiscard]] bool marked(unsigned w) const noexcept {
    return (words_[w / 64].load(std::memory_order_relaxed) >> (w % 64) & 1) != 0;
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
  const unsigned n_;
  const unsigned words_n_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> words_;
  std::unique_ptr<slot[]> slots_;
};

/// How a watcher takes a stuck worker's inbox in: the runtime implements it
/// over its workers (worker::take_in_for_peer), a unit test with a recorder.
class stranded_peers {
 public:
  virtual ~stranded_peers() = default;
  /// Moves worker w's untimed inbox nodes into its run queue; how many.
  virtual std::size_t take_in(unsigned w) noexcept = 0;
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
