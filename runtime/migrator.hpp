// migrator: the moves of queued tasks between workers' rt_queues
// (kernel/sched/rt.c: push_rt_task, find_lock_lowest_rq, pull_rt_task).
//
// migrator implements the moves on a set of rt_queues, a cpupri and an
// overload mask. It knows nothing about threads or doorbells: a unit test
// drives it single-threaded on a synthetic topology of any size, and the
// worker calls it at its scheduling points and rings the doorbells of the
// workers it moved tasks to.
//
// Concurrency: every member of migrator may run on any thread concurrently
// with any other; each takes the locks it needs. Two locks are taken in
// worker-id order; a move that had to drop its own lock to respect that
// order re-checks that the task is still where it was (find_lock_lowest_rq).
// Invariants kept here:
//   4. a worker's overload flag is set iff its pushable list is non-empty
//      (publish() runs under the lock after every change);
//   6. a push moves a task only to a worker whose current priority is
//      strictly lower, re-checked with the target's lock held; at most
//      max_push_tries targets are tried per task.
// And for invariant 5 (settling): a move that lowers the source's level
// (its queued top left) sets the source's `lowered`, so that its owner
// looks for more urgent work elsewhere at its next scheduling point, as on
// any other lowering; an overloaded worker whose push failed while the
// source was higher does not search again until its own top changes or it
// is asked to, so without this the two could wait for each other forever.
#pragma once

#include <span>

#include "cpupri.hpp"
#include "overload.hpp"
#include "rt_queue.hpp"
#include "task_node.hpp"

namespace urt::detail {

class migrator {
 public:
  /// Tries per task to find and lock a lower worker (kernel RT_MAX_TRIES).
  static constexpr int max_push_tries = 3;

  migrator(std::span<rt_queue* const> queues, cpupri& prio, overload_mask& overload) noexcept
      : queues_(queues), prio_(prio), overload_(overload) {}

  /// Under q(w)'s lock: makes cpupri and the overload mask show q(w)'s
  /// current priority and whether it has pushable tasks.
  void publish(unsigned w) noexcept;

  /// What push_one() moved: `target` is none when it moved nothing.
  struct pushed {
    unsigned target = none;
    int priority = 0;        // the task's
    int target_running = 0;  // the level of the target's running task (cpupri; negative: idle)
  };
  /// push_rt_task: moves `self`'s most urgent pushable task to the worker
  /// cpupri finds strictly below it, re-checked under that worker's lock.
  /// Returns where it went and what the target was running, or a target of
  /// none. Takes the locks itself.
  pushed push_one(unsigned self, unsigned rotation) noexcept;

  /// pull_rt_task for one source: with both locks held, moves `src`'s most
  /// urgent pushable task to `self` when it may run there and is more
  /// urgent than `self`'s current priority. Returns whether it moved one.
  bool pull_from(unsigned self, unsigned src) noexcept;
  /// pull_rt_task: pull_from() every overloaded worker in id order. Returns
  /// the number of tasks moved.
  unsigned pull_all(unsigned self) noexcept;

  [[nodiscard]] rt_queue& q(unsigned w) const noexcept { return *queues_[w]; }
  [[nodiscard]] const overload_mask& overload() const noexcept { return overload_; }
  static constexpr unsigned none = cpupri::none;

 private:
  // Moves queued `node` from `from` to `to`; both locks held.
  void move(task_node* node, unsigned from, unsigned to) noexcept;
  // Locks `b` while `a` is held, in id order; false when `a`'s lock had to
  // be dropped for that (the caller then re-checks what it saw under it).
  bool lock_second(unsigned a, unsigned b) noexcept;

  std::span<rt_queue* const> queues_;
  cpupri& prio_;
  overload_mask& overload_;
};

}  // namespace urt::detail
