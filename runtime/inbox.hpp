// inbox: a worker's remote submission queues, one per priority level
// (a lock-free stack each, taken whole by the owner and reversed into a
// private FIFO list), and a bitmap of the levels that may hold nodes.
//
// Why per level: the owner takes few nodes per scheduling point, most
// urgent level first: up to `batch` (8) of the levels above everything its
// run queue holds (what the pick must see), and only `trickle` (4) of the
// levels at or below it (the run queue has work there already; each node
// moved costs a cache miss on a line the spawner wrote, some 100 ns), and
// none of those at a take that found a more urgent level, unless the take
// before left them too (take()). An urgent spawn behind a burst of
// thousands of less urgent ones then waits for a few nodes to be moved,
// not for the whole burst (one FIFO list had to be walked to its end
// first, about 150 us for 10,000). FIFO within a level is kept: each
// level's nodes come out in the order their pushes took effect, and a
// task's own spawn at a level first takes in that level
// (worker::submit_local), so a remote spawn that returned before a local
// one at the same level runs before it.
//
// Why a stack and not a queue: a push is one compare-and-swap that makes
// the node reachable from the level's head in the same instruction. A
// wait-free queue (liburcu's wfcqueue, which urt used before) exchanges the
// tail first and stores the link after it; while its pusher was preempted
// between the two, the node before it and every node pushed after it were
// out of the owner's reach although their spawns had returned, and a less
// urgent task or a later spawn ran first (for up to 4 ms in a stress test:
// DESIGN.md, "Worker inbox"). The price: the push is lock-free rather than
// wait-free (its CAS fails only when another push to the same level of the
// same worker, or the owner's take, changed the head in between, so some
// push always succeeds), and the owner reverses each chain it takes, a
// walk of every node once. The walk is bounded per take (`reverse`) and
// ends early when a more urgent level gets a node: an urgent node pushed
// during the walk of a burst of 10,000 waits for one node of it, not for
// the whole (take()). A level half walked holds spawns that
// returned: the owner picks nothing below it (walking_level()).
//
// Concurrency (any number of pushers, one taker at a time):
//   | may run with ->  | push (any thread) | take (lock holder) | pending (any) |
//   |------------------|-------------------|--------------------|---------------|
//   | push             | yes               | yes                | yes           |
//   | take             | yes               | no                 | yes           |
// "take" is every member that moves nodes out (take, take_level_all,
// take_untimed); "pending" also stands for timed_pending. Its callers hold
// the owner's queue lock (rt_queue), which makes them one taker at a time
// and orders the private lists between them: the owner at its scheduling
// points, or a peer taking the inbox of a worker that reaches none in for
// it (take_untimed, stranded.hpp).
//
// Invariants, per level (and `walking_` has the level's bit exactly while
// unreversed is not empty):
//   - stack: the nodes pushed since the last exchange, newest first, each
//     linked before its CAS published it (a push's release CAS pairs with
//     the owner's acquire exchange; later pushes' CASes continue its
//     release sequence, so one exchange sees every node of the chain).
//   - unreversed (owner's): the rest of the last chain taken, newest
//     first; reversed (owner's): the chain's newer part already reversed,
//     oldest first; fifo (owner's): taken and reversed, oldest first. Every
//     node of fifo was pushed before every node of reversed and
//     unreversed, and those before every node still in the stack, so the
//     owner takes a new chain only when fifo, reversed and unreversed are
//     all empty.
//   - no ABA: the owner never pops one node off the stack, it exchanges the
//     head for null, so a CAS that succeeds on a recycled head is still
//     correct (its node links to what is the head at that instant).
//
// The level bitmap (a Dekker pair with the stacks): a pusher's seq_cst CAS
// publishes its node, then its seq_cst load of the level's bit sets the bit
// unless it sees it set. The owner clears a bit only after it emptied the
// level, with a seq_cst RMW, and then looks at the stack once more (a
// seq_cst load): either the pusher saw the bit clear and sets it, or the
// owner's second look sees the pusher's node and sets the bit back. So a
// level with a node always has its bit set, and the owner finds the most
// urgent pending level with two count-leading-zeros.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "task_node.hpp"
#include "urt/priority.hpp"

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
  /// The most nodes one take() reverses while the runtime runs: a chunk of
  /// a chain's walk (each node a miss on a line its spawner wrote, some
  /// 150 ns when it was written on another CPU just before), so that one
  /// scheduling point does not walk a burst of 10,000 whole. The owner steps
  /// again, without a pick, while a level above its run queue's top is
  /// walked (walking_level()). An urgent node pushed during a walk waits
  /// for at most one node of it.
  static constexpr std::size_t reverse = 256;
  /// Of those, the most for levels at or below the run queue's top: the
  /// pick does not wait for them, and each costs the task it picks next a
  /// miss, so they are walked a little per take, as the trickle moves them.
  static constexpr std::size_t trickle_walk = 2 * trickle;
  /// For take(): no limit (stop() drains everything).
  static constexpr std::size_t unlimited = static_cast<std::size_t>(-1);

  inbox() noexcept = default;
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;

  /// Any thread: pushes `node` onto its priority's stack. Lock-free: the
  /// CAS retries only when another push or the owner's take changed the
  /// head in between. The caller then rings the owner.
  void push(task_node* node) noexcept {
    const auto level = static_cast<unsigned>(node->priority);
    std::atomic<task_node*>& head = stacks_[level];
    // Relaxed: a hint for the owner's take (timed_pending()).
    if (node->timed) timed_.fetch_add(1, std::memory_order_relaxed);
    task_node* top = head.load(std::memory_order_relaxed);
    do {
      node->inbox_next = top;  // private until the CAS publishes it
      // seq_cst: releases the node to the owner's exchange (refill()),
      // and is the pusher's half of the Dekker pair with clear_if_empty().
    } while (!head.compare_exchange_weak(top, node, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
    std::atomic<std::uint64_t>& word = bits_[word_of(level)];
    const std::uint64_t mask = mask_of(level);
    // seq_cst: ordered after the CAS (the Dekker pair, see the top).
    if ((word.load(std::memory_order_seq_cst) & mask) == 0) {
      word.fetch_or(mask, std::memory_order_relaxed);  // ordering: the CAS and the load
    }
  }

  /// Owner: moves nodes out, most urgent level first, FIFO within a level,
  /// calling `f(node)` for each: at most `above` nodes of levels above
  /// `floor()` (re-read per level: the nodes moved raise it) and at most
  /// `rest` of the others, reversing at most `walk_limit` nodes of the
  /// chains taken from the stacks (and, when limited, ending a walk early
  /// where a more urgent level got a node). A level whose chain is not
  /// reversed whole yet gives no node, and the take ends there: the next
  /// take goes on with it, after looking at the more urgent levels again;
  /// meanwhile walking_level() shows it, and no task less urgent than it
  /// may be picked (its spawns returned). A take that moved
  /// nodes above the floor leaves the others to the next take, unless the
  /// previous take left them too (`rest` unlimited: never): the pick is
  /// about to change to a more urgent task, which the trickle's misses
  /// would only delay (about 1 us for 4 nodes written on another CPU; the
  /// p50 of urt-peers (d) at 100 went from 4.7-8.8 to 3.1-6.6 us), and
  /// the levels at or below the floor still get a trickle at least every
  /// other take. Returns how many nodes it moved.
  template <class Floor, class F>
  std::size_t take(Floor&& floor, std::size_t above, std::size_t rest, std::size_t walk_limit,
                   F&& f) noexcept {
    // A limited walk also ends where a level more urgent than the walked
    // one and the run queue's top gets a node, and walks few nodes of a
    // level at or below that top.
    const bool limited = walk_limit != unlimited;
    walk_budget walk{walk_limit, limited ? trickle_walk : unlimited, limited};
    std::size_t taken = 0;
    bool left_rest = false;
    for (int level = top(); level >= 0; level = top_below(level)) {
      const int floor_now = floor();
      std::size_t& budget = level > floor_now ? above : rest;
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
      walk.above = std::max(level, floor_now);
      walk.at_rest = &budget == &rest;
      const std::size_t n = take_level(level, budget, walk, f);
      if (budget != unlimited) budget -= n;  // unlimited stays unlimited (the check above)
      taken += n;
      if (walking(level)) break;  // its walk stopped: the budget, or a more urgent level
    }
    rest_left_ = left_rest;
    return taken;
  }
  /// Owner: at most `limit` nodes, most urgent level first, reversing as
  /// much as that needs.
  template <class F>
  std::size_t take(std::size_t limit, F&& f) noexcept {
    return take([] { return -1; }, limit, 0, unlimited, f);
  }

  /// Owner: every node of `level`.
  template <class F>
  std::size_t take_level_all(int level, F&& f) noexcept {
    if ((bits_[word_of(static_cast<unsigned>(level))].load(std::memory_order_relaxed) &
         mask_of(static_cast<unsigned>(level))) == 0) {
      return 0;
    }
    walk_budget walk{unlimited, unlimited, false};
    return take_level(level, unlimited, walk, f);
  }

  /// A peer holding the owner's queue lock, for a worker that reaches no
  /// scheduling point in time (stranded.hpp, resched.hpp): every node of a
  /// level above `above` (-1: every level), most urgent level first, FIFO
  /// within a level, stopping in each level before its first timed node
  /// (only the owner may put those in its timer queue). Returns how many.
  template <class F>
  std::size_t take_untimed(int above, F&& f) noexcept {
    std::size_t taken = 0;
    walk_budget walk{unlimited, unlimited, false};
    for (int level = top(); level > above && level >= 0; level = top_below(level)) {
      taken += take_level(level, unlimited, walk, f, [](const task_node& n) { return !n.timed; });
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

  /// Owner: the most urgent level whose chain a take left half walked, or
  /// -1. Its nodes' spawns returned, so while it is above the run queue's
  /// top the owner must not pick (it takes again first: worker::step()).
  [[nodiscard]] int walking_level() const noexcept {
    if (walking_[1] != 0) return 64 + 63 - std::countl_zero(walking_[1]);
    if (walking_[0] != 0) return 63 - std::countl_zero(walking_[0]);
    return -1;
  }

  /// Any thread: whether a node may be queued, taken and not yet moved out,
  /// or being reversed (the steps that follow move it). A pusher between
  /// its CAS and its bit is covered by the ring that follows its push.
  [[nodiscard]] bool pending() const noexcept {
    return (bits_[0].load(std::memory_order_relaxed) | bits_[1].load(std::memory_order_relaxed)) !=
           0;
  }

  /// Any thread: the most urgent level whose bit is set (that may hold
  /// pushed nodes), or -1.
  [[nodiscard]] int top() const noexcept { return top_below(priority_levels); }

 private:
  // Bit b of word w: level 64 * w + b.
  static constexpr unsigned word_of(unsigned level) noexcept { return level / 64; }
  static constexpr std::uint64_t mask_of(unsigned level) noexcept {
    return std::uint64_t{1} << (level % 64);
  }
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

  // Whether a level above `level` (-1..priority_levels - 1) has its bit set:
  // top() > level, in a few instructions (the walk asks before each node).
  [[nodiscard]] bool any_above(int level) const noexcept {
    const auto from = static_cast<unsigned>(level + 1);  // the lowest level that counts
    const std::uint64_t high = bits_[1].load(std::memory_order_relaxed);
    if (from >= 64) return (high >> (from - 64)) != 0;
    return high != 0 || (bits_[0].load(std::memory_order_relaxed) >> from) != 0;
  }

  // What is left of a take's walk (`left`; `rest_left` for the levels at
  // or below the floor), and whether it ends early for a more urgent level
  // (not for the takes that must move a level whole): one above `above`.
  struct walk_budget {
    std::size_t left;
    std::size_t rest_left;
    bool yields;
    int above = -1;        // the walked level, or the floor if higher
    bool at_rest = false;  // the walked level is at or below the floor
  };

  // The owner's lists of one level (see the top), under the queue lock.
  struct level_lists {
    task_node* fifo = nullptr;        // oldest first
    task_node* unreversed = nullptr;  // newest first
    task_node* reversed = nullptr;    // oldest first
  };

  // Whether `level` has a chain taken and not reversed whole.
  [[nodiscard]] bool walking(int level) const noexcept {
    const auto u = static_cast<unsigned>(level);
    return (walking_[word_of(u)] & mask_of(u)) != 0;
  }

  // Fills the empty fifo of `level`: takes the stack's chain unless one is
  // being reversed, reverses at most `walk` more of its nodes, and makes
  // the reversed chain the fifo once it is whole. Returns whether the fifo
  // has nodes now.
  bool refill(unsigned level, level_lists& l, walk_budget& walk) noexcept {
    if (l.unreversed == nullptr) {
      // Acquire: pairs with the pushes' CASes (every node of the chain).
      l.unreversed = stacks_[level].exchange(nullptr, std::memory_order_acquire);
      if (l.unreversed == nullptr) return false;
    }
    for (; l.unreversed != nullptr && walk.left > 0; --walk.left) {
      // A node pushed meanwhile at a level the pick would take first ends
      // a limited walk here: the take returns, and the next one takes that
      // level first. A look at the bitmap's line before each node: a hit in
      // this cache (pushers only read it while its bits are set) beside the
      // node's miss.
      if (walk.yields && any_above(walk.above)) break;
      if (walk.at_rest) {
        if (walk.rest_left == 0) break;
        --walk.rest_left;
      }
      task_node* n = l.unreversed;
      l.unreversed = n->inbox_next;
      n->inbox_next = l.reversed;
      l.reversed = n;
    }
    if (l.unreversed != nullptr) {  // the next take goes on
      walking_[word_of(level)] |= mask_of(level);
      return false;
    }
    walking_[word_of(level)] &= ~mask_of(level);
    l.fifo = l.reversed;
    l.reversed = nullptr;
    return true;
  }

  // At most `limit` nodes of `level`, stopping before the first node that
  // `accept` refuses; clears its bit when the level is empty.
  struct accept_all {
    bool operator()(const task_node&) const noexcept { return true; }
  };
  template <class F, class Accept = accept_all>
  std::size_t take_level(int level, std::size_t limit, walk_budget& walk, F& f,
                         Accept accept = {}) noexcept {
    const auto u = static_cast<unsigned>(level);
    level_lists& l = lists_[u];
    std::size_t taken = 0;
    for (;;) {
      if (l.fifo == nullptr && !refill(u, l, walk)) {
        if (l.unreversed != nullptr) return taken;  // the level keeps its bit
        break;
      }
      if (taken == limit) return taken;  // the level keeps its bit
      task_node* node = l.fifo;
      if (!accept(*node)) return taken;  // the level keeps its bit
      l.fifo = node->inbox_next;
      // The captures' line was written by the spawner on another core:
      // start fetching it now, so the miss overlaps the rest of the take.
      __builtin_prefetch(node->payload.storage);
      const bool timed = node->timed;  // read before f() hands the node on
      f(node);
      if (timed) timed_.fetch_sub(1, std::memory_order_relaxed);
      ++taken;
    }
    clear_if_empty(u);
    return taken;
  }

  // The level's lists and stack were empty: clear the bit, then look at
  // the stack again (see the top).
  void clear_if_empty(unsigned level) noexcept {
    std::atomic<std::uint64_t>& word = bits_[word_of(level)];
    // seq_cst, both: the owner's half of the Dekker pair with push()'s CAS
    // and bit load.
    word.fetch_and(~mask_of(level), std::memory_order_seq_cst);
    if (stacks_[level].load(std::memory_order_seq_cst) != nullptr) {
      word.fetch_or(mask_of(level), std::memory_order_relaxed);  // a push came in meanwhile
    }
  }

  // Pushers write the stacks, the owner its lists: apart, so that the
  // owner's walk does not take the pushers' lines.
  alignas(64) std::array<std::atomic<task_node*>, priority_levels> stacks_{};
  alignas(64) std::array<level_lists, priority_levels> lists_{};
  bool rest_left_ = false;  // the last take() left the levels at or below the floor (owner's)
  std::array<std::uint64_t, 2> walking_{};  // levels with a chain half walked (owner's)
  alignas(64) std::array<std::atomic<std::uint64_t>, 2> bits_{};
  std::atomic<std::uint32_t> timed_{0};  // timed nodes pushed and not yet taken (a hint)
};

}  // namespace urt::detail
