#include "rt_queue.hpp"

#include "hot.hpp"

namespace urt::detail {

URT_HOT void rt_queue::enqueue(task_node* node, unsigned self) noexcept {
  node->queued_on = self;
  rq.push_back(&node->rq, node->priority);
  if (node->migratable) pushable.push_back(&node->push, node->priority);
}

void rt_queue::remove(task_node* node) noexcept {
  rq.remove(&node->rq);
  if (node->push.queued()) pushable.remove(&node->push);
}

URT_HOT task_node* rt_queue::pop() noexcept {
  rq_link* link = rq.peek();
  if (link == nullptr) return nullptr;
  task_node* node = task_node::from_rq(link);
  remove(node);
  return node;
}

task_node* rt_queue::pop_normal() noexcept {
  rq_link* link = rq.peek_at(priority_normal);
  if (link == nullptr) return nullptr;
  task_node* node = task_node::from_rq(link);
  remove(node);
  return node;
}

task_node* rt_queue::first_pushable() const noexcept {
  rq_link* link = pushable.peek();
  return link != nullptr ? task_node::from_push(link) : nullptr;
}

}  // namespace urt::detail
