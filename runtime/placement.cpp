#include "placement.hpp"

#include <sched.h>

#include <cstdint>

#include "worker.hpp"

namespace urt::detail {

placement::placement(const cpupri& prio, std::span<const std::unique_ptr<worker>> workers,
                     const urt::topology& topo)
    : prio_(prio), workers_(workers) {
  if (!topo.is_this_system()) return;
  for (const worker_place& p : topo.workers()) {
    if (p.pu >= worker_of_pu_.size()) worker_of_pu_.resize(p.pu + 1, cpupri::none);
    worker_of_pu_[p.pu] = p.worker;
  }
}

// select_task_rq_rt: stay on the spawning task's worker when it runs at a
// lower priority; else the lowest-priority worker cpupri finds below the
// task's; else queue it on the spawning task's worker (which is then
// overloaded, and push migration moves the task as soon as some worker
// drops below it); from an outside thread, the least-loaded worker in the
// affinity.
unsigned placement::place(const task_spec& spec, const worker* self) const noexcept {
  return place(spec.priority, spec.affinity ? &*spec.affinity : nullptr, self);
}

unsigned placement::place(priority_t priority, const worker_set* affinity,
                          const worker* self) const noexcept {
  const bool self_allowed =
      self != nullptr && (affinity == nullptr || affinity->contains(self->id()));
  if (self_allowed && prio_.level(self->id()) < priority) return self->id();
  // The caller's worker; for an outside thread, the worker on the CPU it
  // runs on when that worker is asleep, so that an idle pool wakes the
  // nearest worker (wake-affine: a wake-up on the caller's CPU is cheaper
  // than an IPI to another). An awake worker there would only compete with
  // the caller for its CPU, so then no worker is preferred.
  unsigned near = self != nullptr ? self->id() : cpupri::none;
  if (self == nullptr && !worker_of_pu_.empty()) {
    const int cpu = ::sched_getcpu();
    if (cpu >= 0 && static_cast<std::size_t>(cpu) < worker_of_pu_.size()) {
      const unsigned w = worker_of_pu_[static_cast<std::size_t>(cpu)];
      if (w != cpupri::none && workers_[w]->parking()) near = w;
    }
  }
  thread_local unsigned rotation = 0;
  const unsigned found =
      prio_.find(priority, affinity, near, cpupri::none, rotation++);
  if (found != cpupri::none) return found;
  return self_allowed ? self->id() : place_remote(affinity);
}

unsigned placement::place_remote(const worker_set* affinity) const noexcept {
  // Least-loaded worker in the affinity; the scan starts at a per-thread
  // rotating offset so that equally loaded workers take turns.
  thread_local unsigned rotor = 0;
  const auto n = static_cast<unsigned>(workers_.size());
  const unsigned start = rotor++ % n;
  unsigned best = n;  // replaced by the first worker considered
  std::uint64_t best_load = 0;
  const auto consider = [&](unsigned w) {
    const std::uint64_t load = workers_[w]->load();
    if (best == n || load < best_load) {
      best = w;
      best_load = load;
    }
    return load == 0;  // an idle worker cannot be beaten
  };
  if (affinity == nullptr) {
    for (unsigned i = 0; i < n; ++i) {
      if (consider((start + i) % n)) break;
    }
    return best;
  }
  const worker_set& allowed = *affinity;
  for (unsigned w = allowed.next(start); w < n; w = allowed.next(w + 1)) {
    if (consider(w)) return w;
  }
  for (unsigned w = allowed.first(); w < start; w = allowed.next(w + 1)) {
    if (consider(w)) return w;
  }
  return best;
}

}  // namespace urt::detail
