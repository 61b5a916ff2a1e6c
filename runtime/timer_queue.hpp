// timer_queue: a worker's pending timed releases, a binary min-heap of task
// nodes keyed by release time, ties in the order they were pushed (a heap is
// not stable by itself: ten spawn_at with one deadline came out as 6 2 0 1
// 3 5 7 4 9 8). Owned by one worker (no concurrency; a unit test can drive
// it directly). The parker wakes for the top through the alarm (alarm.hpp).
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
  [[nodiscard]] task_node* top() const noexcept {
    return heap_.empty() ? nullptr : heap_.front().node;
  }
  /// Removes and returns top() (which must exist).
  task_node* pop() noexcept;
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  /// Removes every node for which keep(node) is false, calling drop(node).
  template <class Keep, class Drop>
  void remove_if_not(Keep keep, Drop drop);

 private:
  struct entry {
    task_node* node;
    std::uint64_t seq;  // push order: breaks ties of release time
  };
  // Heap order: the root is released first; of equal releases, the first pushed.
  static bool later(const entry& a, const entry& b) noexcept {
    return a.node->release != b.node->release ? a.node->release > b.node->release
                                              : a.seq > b.seq;
  }
  std::vector<entry> heap_;
  std::uint64_t pushed_ = 0;
};

template <class Keep, class Drop>
void timer_queue::remove_if_not(Keep keep, Drop drop) {
  const auto split =
      std::partition(heap_.begin(), heap_.end(), [&](const entry& e) { return keep(e.node); });
  for (auto it = split; it != heap_.end(); ++it) drop(it->node);
  heap_.erase(split, heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), later);
}

}  // namespace urt::detail
