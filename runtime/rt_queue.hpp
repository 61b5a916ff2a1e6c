// rt_queue: the part of a worker that other workers may touch, under its
// lock: its run queue, its pushable list (the queued tasks that could run
// elsewhere, the kernel's pushable_tasks), the priority of its running
// task, and what cpupri and the overload mask show for it.
//
// Concurrency: every field is guarded by `lock` unless its comment says
// otherwise. The owner holds the lock for each scheduling step; another
// worker holds it for the moment it moves a task in or out (migrator.hpp).
// Two queue locks are only ever taken in worker-id order (DESIGN.md,
// "Lock order"). Progress: blocking (a spinlock held for a few list
// operations).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cpupri.hpp"
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
  /// The worker's FIFO budget is spent and FIFO work is held back
  /// (bandwidth.hpp): it shows the top level, so that no FIFO task is
  /// pushed, pulled or placed here meanwhile. Written by the owner.
  bool fifo_held = false;
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
    if (running == cpupri::level_invalid) return running;
    return fifo_held ? priority_max : std::max(running, rq.top_level());
  }
  /// Under the lock: queues `node` at the tail of its level, and on the
  /// pushable list when it is migratable.
  void enqueue(task_node* node, unsigned self) noexcept;
  /// Under the lock: unlinks a queued `node` from both lists.
  void remove(task_node* node) noexcept;
  /// Under the lock: the most urgent task, unlinked, or nullptr.
  task_node* pop() noexcept;
  /// Under the lock: the first normal-class (priority 0) task, unlinked,
  /// or nullptr.
  task_node* pop_normal() noexcept;
  /// Under the lock: the most urgent task for which `allowed(node)` holds
  /// (FIFO within a level), unlinked, or nullptr. O(tasks skipped).
  template <class Allowed>
  task_node* pop_first(const Allowed& allowed) noexcept {
    rq_link* link = rq.first_where([&](rq_link* l) { return allowed(*task_node::from_rq(l)); });
    if (link == nullptr) return nullptr;
    task_node* node = task_node::from_rq(link);
    remove(node);
    return node;
  }
  /// Under the lock: the most urgent migratable task, still queued, or nullptr.
  [[nodiscard]] task_node* first_pushable() const noexcept;
};

}  // namespace urt::detail
