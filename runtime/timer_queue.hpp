// timer_queue: a worker's pending timed releases, a binary min-heap of task
// nodes keyed by release time. Owned by one worker (no concurrency; a unit
// test can drive it directly). The parker wakes for the top through the
// alarm (alarm.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "task_node.hpp"
#include "urt/timer.hpp"

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

template <class Keep, class Drop>
void timer_queue::remove_if_not(Keep keep, Drop drop) {
  const auto split = std::partition(heap_.begin(), heap_.end(), keep);
  for (auto it = split; it != heap_.end(); ++it) drop(*it);
  heap_.erase(split, heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), later);
}

}  // namespace urt::detail
