// current: what the calling thread is doing for urt, if anything: the
// worker it is, the runtime that worker belongs to, and the task it runs.
// Thread-local; each field is written only by its own thread (the worker
// sets them around its loop and around each task).
#pragma once

namespace urt::detail {

class worker;
struct task_node;

struct thread_context {
  worker* self = nullptr;         // the worker this thread is, while its loop runs
  const void* owner = nullptr;    // that worker's runtime (runtime_shared::owner)
  task_node* task = nullptr;      // the task running now, or nullptr between tasks
  bool delivering_io = false;     // inside io_poller::poll(): completions never run inline
};

inline constinit thread_local thread_context current{};

}  // namespace urt::detail
