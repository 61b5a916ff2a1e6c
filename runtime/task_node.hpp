// task_node: one accepted task, as it travels from spawn to a worker.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "run_queue.hpp"
#include "urt/task.hpp"
#include "urt/timer.hpp"
#include "urt/worker_set.hpp"

namespace urt::detail {

/// A task node is owned by exactly one party at a time: the spawner (until
/// it is pushed), a worker's inbox (until taken), a worker's run queue,
/// the running worker, and finally the node pool. Hand-offs go through the
/// inbox (its push's CAS publishes everything written before it) or
/// stay on one thread. Between workers, a queued node moves under both
/// workers' queue locks (migrator.hpp); `queued_on` says whose queue holds
/// it and is written under that queue's lock.
///
/// Layout: everything a spawn and a run touch besides the callable's
/// captures (hooks, priority, the payload's function pointers) shares the
/// first cache line; the captures fill the second; the timing fields and
/// the affinity, untouched by plain any-worker spawns, come last. Each line
/// crosses cores once per hop.
struct task_node {
  task_node* inbox_next = nullptr;  // the inbox's link (inbox.hpp)
  rq_link rq;                       // run queue hook
  priority_t priority = priority_normal;
  bool any_worker = true;   // affinity is "every worker"; `affinity` unused
  bool timed = false;       // release/period/periodic below are valid
  bool migratable = false;  // may run on more than one worker (pushable while queued)
  std::uint8_t group = 0;   // its task group's id (urt::group::id(), < max_groups)
  unsigned queued_on = 0;   // the worker whose run queue holds it (valid while rq.queued())
  bool pooled = true;       // from the node pool's chunks; false: one heap node (node_pool.hpp)
  task_payload payload;
  // Migratable tasks only: the hook of the pushable list while queued.
  rq_link push;
  // Timed tasks only (spawn_at, every): untouched by plain spawns.
  clock::time_point release{};
  clock::time_point called_at{};       // when spawn_at()/every() queued it
  std::chrono::nanoseconds period{0};  // > 0: a periodic series
  periodic_state* periodic = nullptr;  // the series' shared cancel flag
  worker_set affinity;

  /// The periodic series this node runs, or nullptr (the timing fields are
  /// stale leftovers unless `timed`).
  [[nodiscard]] periodic_state* series() const noexcept { return timed ? periodic : nullptr; }

  static task_node* from_payload(task_payload* p) noexcept {
    return reinterpret_cast<task_node*>(reinterpret_cast<std::byte*>(p) -
                                        offsetof(task_node, payload));
  }
  static task_node* from_rq(rq_link* l) noexcept {
    return reinterpret_cast<task_node*>(reinterpret_cast<std::byte*>(l) - offsetof(task_node, rq));
  }
  static task_node* from_push(rq_link* l) noexcept {
    return reinterpret_cast<task_node*>(reinterpret_cast<std::byte*>(l) -
                                        offsetof(task_node, push));
  }
  /// Whether the task may run on worker `w`.
  [[nodiscard]] bool allowed_on(unsigned w) const noexcept {
    return any_worker || affinity.contains(w);
  }
};
static_assert(std::is_standard_layout_v<task_node>, "offsetof needs it");
static_assert(offsetof(task_node, payload) + offsetof(task_payload, storage) <= 64,
              "hooks and function pointers must share the first cache line");

}  // namespace urt::detail
