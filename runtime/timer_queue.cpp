#include "timer_queue.hpp"

#include <algorithm>

namespace urt::detail {

void timer_queue::push(task_node* node) {
  heap_.push_back({node, pushed_++});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

task_node* timer_queue::pop() noexcept {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  task_node* node = heap_.back().node;
  heap_.pop_back();
  return node;
}

}  // namespace urt::detail
