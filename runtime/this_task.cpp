// The this_task API and urt::preempt_point(): what a running task asks
// about itself, answered from the calling thread's context (current.hpp).
#include <stdexcept>

#include "current.hpp"
#include "hot.hpp"
#include "task_node.hpp"
#include "urt/task.hpp"
#include "urt/timer.hpp"
#include "worker.hpp"

namespace urt::this_task {
namespace {

detail::task_node& current_task() {
  if (detail::current.task == nullptr) {
    throw std::logic_error("urt::this_task: the calling thread is not running an urt task");
  }
  return *detail::current.task;
}

}  // namespace

bool running() noexcept { return detail::current.task != nullptr; }

unsigned worker_id() {
  current_task();
  return detail::current.self->id();
}

priority_t priority() { return current_task().priority; }

clock::time_point release_time() {
  const detail::task_node& task = current_task();
  return task.timed ? task.release : clock::time_point{};
}

unsigned cid() {
  const unsigned group = current_task().group;  // throws outside a task, before self is used
  return detail::current.self->cid(group);
}

}  // namespace urt::this_task

namespace urt {

URT_HOT bool preempt_point() noexcept {
  return detail::current.task != nullptr && detail::current.self->preempt_point();
}

}  // namespace urt
