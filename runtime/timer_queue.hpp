// timer_queue and alarm: a worker's pending timed releases.
//
// timer_queue is a binary min-heap of task nodes keyed by release time,
// owned by one worker (no concurrency; a unit test can drive it directly).
// alarm is the worker's absolute timerfd (TFD_TIMER_ABSTIME on
// CLOCK_MONOTONIC, the clock of urt::clock) in its io_context: set it to
// the nearest deadline before parking and the park ends then. Absolute
// deadlines keep periodic releases drift-free: release k is computed as
// start + k * period and armed as such, never as "now + period".
#pragma once

#include <asio/io_context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "task_node.hpp"
#include "urt/timer.hpp"
#include "wakeup_fd.hpp"

namespace urt::detail {

class timer_queue {
 public:
  timer_queue() { heap_.reserve(64); }
  /// Adds a node whose `release` is set. May allocate when the heap grows
  /// past its high-water mark (never in steady state).
  void push(task_node* node);
  /// The node released first, or nullptr.
  [[nodiscard]] task_node* top() const noexcept { return heap_.empty() ? nullptr : heap_.front(); }
  /// Removes and returns top() (which must exist).
  task_node* pop() noexcept;
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  /// Removes every node for which keep(node) is false, calling drop(node).
  template <class Keep, class Drop>
  void remove_if_not(Keep keep, Drop drop);

 private:
  // Heap order: the root is released first.
  static bool later(const task_node* a, const task_node* b) noexcept {
    return a->release > b->release;
  }
  std::vector<task_node*> heap_;
};

class alarm {
 public:
  /// Creates the timerfd (throws std::system_error) and binds it to `io`.
  explicit alarm(asio::io_context& io);
  alarm(const alarm&) = delete;
  alarm& operator=(const alarm&) = delete;

  void disarm() { fd_.disarm(); }
  /// Owner, before parking: the next expiry is `at` (absolute). Sets the
  /// timerfd, which also clears its expiry count, and arms the wait when
  /// the last one completed; no system call when it is set there already
  /// and has not fired since. The timerfd is never read.
  void set(clock::time_point at);
  /// Expiries that woke the owner (owner writes, anyone reads).
  [[nodiscard]] std::uint64_t fired() const noexcept { return fd_.completions(); }

 private:
  wakeup_fd fd_;
  clock::time_point armed_ = clock::time_point::max();
};

template <class Keep, class Drop>
void timer_queue::remove_if_not(Keep keep, Drop drop) {
  const auto split = std::partition(heap_.begin(), heap_.end(), keep);
  for (auto it = split; it != heap_.end(); ++it) drop(*it);
  heap_.erase(split, heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), later);
}

}  // namespace urt::detail
