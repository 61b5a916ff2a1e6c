#include "migrator.hpp"

#include "hot.hpp"

namespace urt::detail {

URT_HOT void migrator::publish(unsigned w) noexcept {
  rt_queue& queue = q(w);
  const int level = queue.current();
  if (level != queue.published) {
    prio_.set(w, level);
    queue.published = level;
  }
  const int top = queue.pushable.top_level();
  if (top != queue.overload_top) {
    overload_.set(w, top);
    queue.overload_top = top;
    ++queue.top_changes;
  }
}

bool migrator::lock_second(unsigned a, unsigned b) noexcept {
  if (b > a) {
    q(b).lock_remote();
    return true;
  }
  if (q(b).lock.try_lock()) {
    q(b).remote_locks.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // b < a and b is busy: take them in id order (kernel double_lock_balance).
  q(a).lock.unlock();
  q(b).lock_remote();
  q(a).lock.lock();
  return false;
}

void migrator::move(task_node* node, unsigned from, unsigned to) noexcept {
  rt_queue& src = q(from);
  rt_queue& dst = q(to);
  src.remove(node);
  dst.enqueue(node, to);
  // Single writer at a time (the lock holder): load + store, no RMW.
  src.migrated_out.store(src.migrated_out.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  dst.migrated_in.store(dst.migrated_in.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  // Relaxed: the owner's idle spin only uses it to decide to take the lock,
  // whose acquire then shows the queued task. The doorbell the caller rings
  // after unlocking orders it against the owner's parking (doorbell.hpp).
  dst.moved_in.store(true, std::memory_order_relaxed);
  // The target first: a lock-free reader of the overload mask (a worker
  // deciding whether to wait for a push) sees the task at one of the two
  // places at least, never at neither.
  publish(to);
  const int shown = src.published;
  publish(from);
  if (src.published < shown) src.lowered = true;  // its owner looks elsewhere
}

migrator::pushed migrator::push_one(unsigned self, unsigned rotation) noexcept {
  rt_queue& src = q(self);
  for (int tries = 0; tries < max_push_tries; ++tries) {
    src.lock.lock();
    task_node* task = src.first_pushable();
    if (task == nullptr) {
      src.lock.unlock();
      return {};
    }
    const unsigned target =
        prio_.find(task->priority, task->any_worker ? nullptr : &task->affinity, self, none,
                   rotation + static_cast<unsigned>(tries));
    if (target == none || target == self) {
      src.lock.unlock();
      return {};
    }
    rt_queue& dst = q(target);
    // When our lock was dropped on the way, the task may have run (and its
    // node been reused) meanwhile: compare the pointer before reading it.
    const bool still_first = lock_second(self, target) || task == src.first_pushable();
    // Invariant 6: strictly lower, checked with the target's lock held.
    const bool ok = still_first && dst.running != cpupri::level_invalid &&
                    task->allowed_on(target) && dst.current() < task->priority;
    pushed done;
    if (ok) {
      // Read before the unlock: once there, the task may run and be freed.
      done = {target, task->priority, dst.running};
      move(task, self, target);
    }
    dst.lock.unlock();
    src.lock.unlock();
    if (ok) return done;
  }
  return {};
}

bool migrator::pull_from(unsigned self, unsigned src_id) noexcept {
  if (src_id == self) return false;
  rt_queue& me = q(self);
  rt_queue& src = q(src_id);
  // Both locks in id order; the source's is the remote one.
  if (self < src_id) {
    me.lock.lock();
    src.lock_remote();
  } else {
    src.lock_remote();
    me.lock.lock();
  }
  bool moved = false;
  if (me.running != cpupri::level_invalid) {
    // The most urgent pushable task there that may run here and beats
    // what would run here next (kernel pick_highest_pushable_task). Unlike
    // the kernel, a task more urgent than the source's running one is
    // pulled too: the source cannot preempt its running task to run it.
    rq_link* link = src.pushable.first_where(
        [&](rq_link* l) { return task_node::from_push(l)->allowed_on(self); }, me.current());
    if (link != nullptr) {
      move(task_node::from_push(link), src_id, self);
      moved = true;
    }
  }
  src.lock.unlock();
  me.lock.unlock();
  return moved;
}

unsigned migrator::pull_all(unsigned self) noexcept {
  unsigned moved = 0;
  if (!overload_.any()) return 0;
  for (unsigned w = overload_.next(none); w != none; w = overload_.next(w)) {
    if (w != self && pull_from(self, w)) ++moved;
  }
  return moved;
}

}  // namespace urt::detail
