// migrate: the locked run queue of a worker and the moves between them
// (kernel/sched/rt.c: push_rt_task, find_lock_lowest_rq, pull_rt_task).
//
// rt_queue is the part of a worker that other workers may touch: its run
// queue, its pushable list (the queued tasks that could run elsewhere, the
// kernel's pushable_tasks), the priority of its running task, and what
// cpupri and the overload mask show for it. Everything in it is guarded by
// its lock. The owner holds the lock for each scheduling step; another
// worker holds it for the moment it moves a task in or out.
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

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>

#include "cpupri.hpp"
#include "overload.hpp"
#include "run_queue.hpp"
#include "spinlock.hpp"
#include "task_node.hpp"

namespace urt::detail {

struct alignas(64) rt_queue {
  spinlock lock;
  run_queue rq;        // every queued task (hook task_node::rq)
  run_queue pushable;  // the migratable ones among them (hook task_node::push)
  /// Priority of the running task, level_idle between tasks, level_invalid
  /// once the worker has stopped (no task may be moved in then).
  int running = cpupri::level_idle;
  int published = cpupri::level_invalid;  // the level cpupri shows
  int overload_top = -1;  // what the overload mask shows: top pushable level or -1
  std::uint64_t top_changes = 0;  // times overload_top changed (see worker::push_tasks)
  /// Set when a move out of this queue lowered its level (see above);
  /// the owner clears it at its next scheduling point and acts on it.
  bool lowered = false;
  [[nodiscard]] bool overloaded() const noexcept { return overload_top >= 0; }
  /// Set (under the lock) when another worker moved a task in; the owner
  /// clears it at its next step. Read without the lock by the owner's
  /// idle spin (relaxed: it only decides when to take the lock and look).
  std::atomic<bool> moved_in{false};
  // Written under the lock, read anywhere (relaxed: statistics and load).
  // On a line of their own: every remote spawn reads them (worker::load())
  // and they change only when a task migrates, while the line above changes
  // at every step.
  alignas(64) std::atomic<std::uint64_t> migrated_in{0};
  std::atomic<std::uint64_t> migrated_out{0};
  /// Times another worker took this lock (a push in, a pull out): the
  /// contention that push_ipi avoids and pull causes. Any thread (relaxed RMW: a statistic on the migration path).
  std::atomic<std::uint64_t> remote_locks{0};
  /// Takes the lock on behalf of another thread, counting it.
  void lock_remote() noexcept {
    lock.lock();
    remote_locks.fetch_add(1, std::memory_order_relaxed);
  }

  /// Under the lock: the worker's current priority (running or queued),
  /// or level_invalid once stopped.
  [[nodiscard]] int current() const noexcept {
    return running == cpupri::level_invalid ? running : std::max(running, rq.top_level());
  }
  /// Under the lock: queues `node` at the tail of its level, and on the
  /// pushable list when it is migratable.
  void enqueue(task_node* node, unsigned self) noexcept;
  /// Under the lock: unlinks a queued `node` from both lists.
  void remove(task_node* node) noexcept;
  /// Under the lock: the most urgent task, unlinked, or nullptr.
  task_node* pop() noexcept;
  /// Under the lock: the most urgent migratable task, still queued, or nullptr.
  [[nodiscard]] task_node* first_pushable() const noexcept;
};

class migrator {
 public:
  /// Tries per task to find and lock a lower worker (kernel RT_MAX_TRIES).
  static constexpr int max_push_tries = 3;

  migrator(std::span<rt_queue* const> queues, cpupri& prio, overload_mask& overload) noexcept
      : queues_(queues), prio_(prio), overload_(overload) {}

  /// Under q(w)'s lock: makes cpupri and the overload mask show q(w)'s
  /// current priority and whether it has pushable tasks.
  void publish(unsigned w) noexcept;

  /// push_rt_task: moves `self`'s most urgent pushable task to the worker
  /// cpupri finds strictly below it, re-checked under that worker's lock.
  /// Returns the worker it went to, or none. Takes the locks itself.
  unsigned push_one(unsigned self, unsigned rotation) noexcept;

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
