// run_queue: the per-worker priority array (kernel: struct rt_prio_array).
//
// 100 levels (0 = normal class, 1..99 = FIFO, higher = more urgent), each an
// intrusive circular FIFO list, plus a bitmap with one bit per non-empty
// level. Bit index = priority_max - level, so the most urgent level is the
// lowest set bit, found with two count-trailing-zeros at most: O(1). That
// level is kept too (top_), as the kernel's rt_prio_array does not: a
// scheduling point asks for it a dozen times (the worker's current level,
// the published level, the pushable list's top), and a lookup of one word
// costs less than two bitmap tests each time (callgrind, one worker running
// a chain of asio::defer steps: about 95 of the 1,068 instructions per link
// went to them). It changes only when a level becomes non-empty above it
// or its own level empties.
//
// Concurrency: none. A run queue is a plain single-threaded structure owned
// by one worker; whoever touches it from elsewhere must hold that worker's
// queue lock. Nothing here allocates; entries live in the task nodes.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "urt/priority.hpp"

namespace urt::detail {

/// The intrusive hook a queued entry carries.
struct rq_link {
  rq_link* next = nullptr;
  rq_link* prev = nullptr;
  std::uint8_t level = 0;  ///< valid while queued
  [[nodiscard]] bool queued() const noexcept { return next != nullptr; }
};

class run_queue {
 public:
  run_queue() noexcept;
  run_queue(const run_queue&) = delete;  // the list heads point at themselves
  run_queue& operator=(const run_queue&) = delete;

  /// Appends `e` (not queued) at the tail of `level` (0..99): normal enqueue, yield.
  void push_back(rq_link* e, int level) noexcept;
  /// Inserts `e` (not queued) at the head of `level`: used when a running
  /// task's priority is lowered, so it stays first at its new level.
  void push_front(rq_link* e, int level) noexcept;
  /// Unlinks a queued `e` from wherever it is in its level.
  void remove(rq_link* e) noexcept;
  /// The head of the most urgent non-empty level, or nullptr.
  [[nodiscard]] rq_link* peek() const noexcept {
    const int level = top_level();
    return level < 0 ? nullptr : heads_[static_cast<std::size_t>(level)].next;
  }
  /// Removes and returns peek(), or nullptr when empty.
  rq_link* pop() noexcept;
  /// The most urgent non-empty level, or -1 when empty.
  [[nodiscard]] int top_level() const noexcept { return top_; }
  /// The first entry, most urgent level first and FIFO within a level,
  /// for which `pred(entry)` holds, stopping (nullptr) once `stop_below`
  /// is reached: only levels above it are visited. O(entries visited).
  template <class Pred>
  [[nodiscard]] rq_link* first_where(Pred pred, int stop_below = -1) const noexcept {
    for (std::size_t w = 0; w < bitmap_.size(); ++w) {
      for (std::uint64_t bits = bitmap_[w]; bits != 0; bits &= bits - 1) {
        const int level = priority_max - static_cast<int>(w * 64) - std::countr_zero(bits);
        if (level <= stop_below) return nullptr;
        const rq_link& head = heads_[static_cast<std::size_t>(level)];
        for (rq_link* e = head.next; e != &head; e = e->next) {
          if (pred(e)) return e;
        }
      }
    }
    return nullptr;
  }
  /// Whether `level` holds an entry: one bit test.
  [[nodiscard]] bool has(int level) const noexcept {
    return (bitmap_[bit_of(level) / 64] >> (bit_of(level) % 64) & 1U) != 0;
  }
  /// The head of `level`, or nullptr when it is empty.
  [[nodiscard]] rq_link* peek_at(int level) const noexcept {
    return has(level) ? heads_[static_cast<std::size_t>(level)].next : nullptr;
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Entries at `level`: O(entries there), for tests and checks.
  [[nodiscard]] std::size_t size_at(int level) const noexcept;

 private:
  static constexpr unsigned bit_of(int level) noexcept {
    return static_cast<unsigned>(priority_max - level);
  }
  void mark(int level) noexcept;
  void unmark_if_empty(int level) noexcept;
  /// The most urgent level with its bit set, or -1: what top_ must equal.
  [[nodiscard]] int scan_top() const noexcept {
    if (bitmap_[0] != 0) return priority_max - std::countr_zero(bitmap_[0]);
    if (bitmap_[1] != 0) return priority_max - 64 - std::countr_zero(bitmap_[1]);
    return -1;
  }

  std::array<std::uint64_t, 2> bitmap_{};
  int top_ = -1;                                  // == scan_top() between members
  std::array<rq_link, priority_levels> heads_{};  // circular sentinels
  std::size_t size_ = 0;
};

}  // namespace urt::detail
