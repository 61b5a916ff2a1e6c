// inbox: a worker's remote submission queues, one per priority level
// (liburcu's wait-free concurrent queue, wfcqueue, each), a bitmap of the
// levels that may hold nodes, and a private splice list per level on the
// owner's side.
//
// Why per level: the owner takes few nodes per scheduling point, most
// urgent level first: up to `batch` (8) of the levels above everything its
// run queue holds (what the pick must see), and only `trickle` (4) of the
// levels at or below it (the run queue has work there already; each node
// moved costs a cache miss on a line the spawner wrote, some 100 ns), and
// none of those at a take that found a more urgent level, unless the take
// before left them too (take()). An urgent spawn
// behind a burst of thousands of less urgent ones then waits for a few
// nodes to be moved, not for the whole burst (one FIFO list had to be
// walked to its end first, about 150 us for 10,000). FIFO within a level is kept:
// each level is one FIFO queue, and a task's own spawn at a level first
// takes in that level (worker::submit_local), so a remote spawn that
// returned before a local one at the same level runs before it.
//
// Concurrency (the wfcqueue model: any number of enqueuers, one dequeuer):
//   | may run with ->  | push (any thread) | take (lock holder) | pending (any) |
//   |------------------|-------------------|--------------------|---------------|
//   | push             | yes               | yes                | yes           |
//   | take             | yes               | no                 | yes           |
// "take" is every member that moves nodes out (take, take_level_all,
// take_untimed); "pending" also stands for timed_pending. Its callers hold
// the owner's queue lock (rt_queue), which
// makes them one dequeuer at a time and orders the private lists between
// them: the owner at its scheduling points, or a peer taking the inbox of
// a worker that reaches none in for it (take_untimed, stranded.hpp).
// push() is wait-free and publishes everything written to the node before
// it (the enqueue is a full barrier; take's dequeue depends on its loads).
// take() uses only the non-blocking wfcqueue calls: the blocking ones wait
// for an enqueuer preempted between its tail exchange and its link store
// by spinning, then sleeping 10 ms per round, which no real-time worker can
// afford. A node whose enqueue is still in flight is taken at a later
// scheduling point instead; pending() reports it meanwhile, and its
// pusher rings the owner's doorbell once it is linked. So are the node
// linked just before it (its `next` is not stored yet) and every node
// after it, though their spawns returned: FIFO and strict priority wait
// for that enqueue (runtime::spawn states the exception; DESIGN.md,
// invariant 8).
//
// The level bitmap (a Dekker pair with the queues): a pusher enqueues (the
// exchange on the tail is a full barrier, liburcu's uatomic_xchg), then
// sets its level's bit unless it sees it set. The owner clears a bit only
// after it emptied the level, with a seq_cst RMW, and then looks at the
// queue once more: either the pusher saw the bit clear and sets it, or the
// owner's second look sees the pusher's tail exchange and sets the bit
// back. So a level with a node always has its bit set, and the owner finds
// the most urgent pending level with two count-leading-zeros.
#pragma once

#include <urcu/wfcqueue.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "task_node.hpp"
#include "urt/priority.hpp"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace urt::detail {

class inbox {
 public:
  /// The most nodes of levels above the run queue's top one take() moves.
  /// The pick needs one; the rest save steps while a burst sits above an
  /// empty run queue. Each costs a miss on a line the spawner wrote, which
  /// a worker woken by a burst pays cold (some 200 ns each on the 2-core
  /// VM): with 64, its first step took 10-20 us before the first task, and
  /// an urgent spawn arriving meanwhile waited for it (bench/README.md,
  /// "urt-peers (d): the woken worker's first step").
  static constexpr std::size_t batch = 8;
  /// The most nodes of levels at or below it one take() moves.
  static constexpr std::size_t trickle = 4;
  /// For take(): no limit (stop() drains everything).
  static constexpr std::size_t unlimited = static_cast<std::size_t>(-1);

  inbox() noexcept {
    for (level_queue& q : levels_) {
      __cds_wfcq_init(&q.head, &q.tail);
      __cds_wfcq_init(&q.spliced_head, &q.spliced_tail);
    }
  }
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;

  /// Any thread: appends `node` to its priority's queue. The caller then
  /// rings the owner.
  void push(task_node* node) noexcept {
    const auto level = static_cast<unsigned>(node->priority);
    level_queue& q = levels_[level];
    cds_wfcq_node_init(&node->inbox);
    // Relaxed: a hint for the owner's take (timed_pending()).
    if (node->timed) timed_.fetch_add(1, std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
    __tsan_release(node);  // TSAN cannot see liburcu's atomics: pairs with take()
#endif
    cds_wfcq_enqueue(__cds_wfcq_head_cast(&q.head), &q.tail, &node->inbox);
    // The enqueue's exchange is a full barrier: this load is ordered after
    // it (the Dekker pair with clear_if_empty(); see the top).
    std::atomic<std::uint64_t>& word = bits_[word_of(level)];
    const std::uint64_t mask = mask_of(level);
    if ((word.load(std::memory_order_relaxed) & mask) == 0) {
      word.fetch_or(mask, std::memory_order_relaxed);  // ordering: the enqueue's barrier
    }
  }

  /// Owner: moves nodes out, most urgent level first, FIFO within a level,
  /// calling `f(node)` for each whose enqueue has completed: at most
  /// `above` nodes of levels above `floor()` (re-read per level: the nodes
  /// moved raise it) and at most `rest` of the others. A take that moved
  /// nodes above the floor leaves the others to the next take, unless the
  /// previous take left them too (`rest` unlimited: never): the pick is
  /// about to change to a more urgent task, which the trickle's misses
  /// would only delay (about 1 us for 4 nodes written on another CPU; the
  /// p50 of urt-peers (d) at 100 went from 4.7-8.8 to 3.1-6.6 us), and
  /// the levels at or below the floor still get a trickle at least every
  /// other take. Returns how many.
  template <class Floor, class F>
  std::size_t take(Floor&& floor, std::size_t above, std::size_t rest, F&& f) noexcept {
    std::size_t taken = 0;
    bool left_rest = false;
    for (int level = top(); level >= 0; level = top_below(level)) {
      std::size_t& budget = level > floor() ? above : rest;
      // Levels are walked down and the floor only rises: every node taken
      // so far was above it.
      if (&budget == &rest && taken > 0 && rest != unlimited && !rest_left_) {
        left_rest = true;
        break;
      }
      if (budget == 0) {
        if (&budget == &rest) break;  // every lower level is at or below the floor too
        continue;
      }
      const std::size_t n = take_level(level, budget, f);
      budget -= n;
      taken += n;
    }
    rest_left_ = left_rest;
    return taken;
  }
  /// Owner: at most `limit` nodes, most urgent level first.
  template <class F>
  std::size_t take(std::size_t limit, F&& f) noexcept {
    return take([] { return -1; }, limit, 0, f);
  }

  /// Owner: every node of `level` whose enqueue has completed.
  template <class F>
  std::size_t take_level_all(int level, F&& f) noexcept {
    if ((bits_[word_of(static_cast<unsigned>(level))].load(std::memory_order_relaxed) &
         mask_of(static_cast<unsigned>(level))) == 0) {
      return 0;
    }
    return take_level(level, unlimited, f);
  }

  /// A peer holding the owner's queue lock, for a worker that reaches no
  /// scheduling point in time (stranded.hpp, resched.hpp): every node of a
  /// level above `above` whose enqueue has completed (-1: every level),
  /// most urgent level first, FIFO within a level, stopping in each level
  /// before its first timed node (only the owner may put those in its
  /// timer queue). Returns how many.
  template <class F>
  std::size_t take_untimed(int above, F&& f) noexcept {
    std::size_t taken = 0;
    for (int level = top(); level > above && level >= 0; level = top_below(level)) {
      taken += take_level(level, unlimited, f, [](const task_node& n) { return !n.timed; });
    }
    return taken;
  }

  /// Any thread: whether a timed node (spawn_at, every) may still be queued
  /// here: the owner then takes everything before it releases due timers,
  /// so that a due node still in the inbox behind a backlog does not queue
  /// after releases with later deadlines (worker::drain_inbox()).
  [[nodiscard]] bool timed_pending() const noexcept {
    return timed_.load(std::memory_order_relaxed) != 0;
  }

  /// Any thread: whether a node may be queued, or its enqueue is in flight
  /// (the step that follows takes it once it is linked). A pusher between
  /// its enqueue and its bit is covered by the ring that follows its push.
  [[nodiscard]] bool pending() const noexcept {
    return (bits_[0].load(std::memory_order_relaxed) | bits_[1].load(std::memory_order_relaxed)) != 0;
  }

 private:
  // Bit b of word w: level 64 * w + b.
  static constexpr unsigned word_of(unsigned level) noexcept { return level / 64; }
  static constexpr std::uint64_t mask_of(unsigned level) noexcept {
    return std::uint64_t{1} << (level % 64);
  }
  // The most urgent level whose bit is set, or -1.
  [[nodiscard]] int top() const noexcept { return top_below(priority_levels); }
  // The most urgent level below `level` whose bit is set, or -1.
  [[nodiscard]] int top_below(int level) const noexcept {
    for (int w = (level - 1) / 64; w >= 0 && level > 0; --w) {
      std::uint64_t v = bits_[static_cast<unsigned>(w)].load(std::memory_order_relaxed);
      const int first = w * 64;
      if (level - first < 64) v &= (std::uint64_t{1} << (level - first)) - 1;
      if (v != 0) return first + 63 - std::countl_zero(v);
    }
    return -1;
  }

  // liburcu's CDS_WFCQ_WOULDBLOCK, without its C-style cast.
  static cds_wfcq_node* would_block() noexcept {
    return reinterpret_cast<cds_wfcq_node*>(-1L);
  }

  struct level_queue {
    // Producers touch the tail (and the head's link when the queue was
    // empty), the owner the spliced list.
    __cds_wfcq_head head{};
    cds_wfcq_tail tail{};
    __cds_wfcq_head spliced_head{};
    cds_wfcq_tail spliced_tail{};
  };

  // At most `limit` nodes of `level`, stopping before the first node that
  // `accept` refuses; clears its bit when the level is empty.
  struct accept_all {
    bool operator()(const task_node&) const noexcept { return true; }
  };
  template <class F, class Accept = accept_all>
  std::size_t take_level(int level, std::size_t limit, F& f, Accept accept = {}) noexcept {
    level_queue& q = levels_[static_cast<unsigned>(level)];
    std::size_t taken = 0;
    for (;;) {
      // Refill the private list from the shared queue when it runs dry.
      if (cds_wfcq_empty(__cds_wfcq_head_cast(&q.spliced_head), &q.spliced_tail)) {
        cds_wfcq_node* first = __cds_wfcq_first_nonblocking(__cds_wfcq_head_cast(&q.head), &q.tail);
        if (first == nullptr || first == would_block()) break;
        // The first link is in place, so this cannot return WOULDBLOCK.
        __cds_wfcq_splice_nonblocking(__cds_wfcq_head_cast(&q.spliced_head), &q.spliced_tail,
                                      __cds_wfcq_head_cast(&q.head), &q.tail);
      }
      if (taken == limit) return taken;  // the level keeps its bit
      // The private list's first node is complete (the splice or the
      // previous dequeue linked it): look before taking it.
      if constexpr (!std::is_same_v<Accept, accept_all>) {
        cds_wfcq_node* first =
            __cds_wfcq_first_nonblocking(__cds_wfcq_head_cast(&q.spliced_head), &q.spliced_tail);
        if (first != nullptr && first != would_block()) {
          task_node* next = task_node::from_inbox(first);
#if defined(__SANITIZE_THREAD__)
          __tsan_acquire(next);  // pairs with push(), as the dequeue below does
#endif
          if (!accept(*next)) return taken;  // the level keeps its bit
        }
      }
      cds_wfcq_node* link =
          __cds_wfcq_dequeue_nonblocking(__cds_wfcq_head_cast(&q.spliced_head), &q.spliced_tail);
      if (link == nullptr) continue;     // the private list ran dry: refill
      if (link == would_block()) return taken;  // a link store in flight: next time
      task_node* node = task_node::from_inbox(link);
#if defined(__SANITIZE_THREAD__)
      __tsan_acquire(node);  // pairs with push()
#endif
      // The captures' line was written by the spawner on another core: start
      // fetching it now, so the miss overlaps the rest of the walk.
      __builtin_prefetch(node->payload.storage);
      const bool timed = node->timed;  // read before f() hands the node on
      f(node);
      if (timed) timed_.fetch_sub(1, std::memory_order_relaxed);
      ++taken;
    }
    clear_if_empty(static_cast<unsigned>(level), q);
    return taken;
  }

  // The level's shared queue looked empty (or its head is in flight) and
  // its private list is empty: clear the bit, then look again (see the top).
  void clear_if_empty(unsigned level, level_queue& q) noexcept {
    std::atomic<std::uint64_t>& word = bits_[word_of(level)];
    // seq_cst: the owner's half of the Dekker pair with push()'s enqueue
    // barrier and bit load.
    word.fetch_and(~mask_of(level), std::memory_order_seq_cst);
    if (!cds_wfcq_empty(__cds_wfcq_head_cast(&q.head), &q.tail)) {
      word.fetch_or(mask_of(level), std::memory_order_relaxed);  // a push came in meanwhile
    }
  }

  std::array<level_queue, priority_levels> levels_;
  bool rest_left_ = false;  // the last take() left the levels at or below the floor (owner's)
  alignas(64) std::array<std::atomic<std::uint64_t>, 2> bits_{};
  std::atomic<std::uint32_t> timed_{0};  // timed nodes pushed and not yet taken (a hint)
};

}  // namespace urt::detail
