#include "placement.hpp"

#include <sched.h>

#include "hot.hpp"
#include "worker.hpp"

namespace urt::detail {
namespace {

// place_on()'s view of the runtime's workers.
struct runtime_workers {
  std::span<const std::unique_ptr<worker>> all;
  [[nodiscard]] std::size_t size() const noexcept { return all.size(); }
  [[nodiscard]] std::uint64_t load(unsigned w) const noexcept { return all[w]->load(); }
  [[nodiscard]] bool parking(unsigned w) const noexcept { return all[w]->parking(); }
  [[nodiscard]] bool asleep(unsigned w) const noexcept { return all[w]->asleep(); }
};

}  // namespace

placement::placement(const cpupri& prio, std::span<const std::unique_ptr<worker>> workers,
                     const urt::topology& topo, worker_binding binding, worker_policy policy)
    : prio_(prio), workers_(workers), fair_workers_(policy == worker_policy::other) {
  if (!topo.is_this_system() || binding != worker_binding::pu) return;
  for (const worker_place& p : topo.workers()) {
    if (p.pu >= worker_of_pu_.size()) worker_of_pu_.resize(p.pu + 1, cpupri::none);
    worker_of_pu_[p.pu] = p.worker;
  }
}

unsigned placement::place(const task_spec& spec, const worker* self) const noexcept {
  return place(spec.priority, spec.affinity ? &*spec.affinity : nullptr, self);
}

URT_HOT unsigned placement::place(priority_t priority, const worker_set* affinity,
                                  const worker* self, priority_t continuation_of) const noexcept {
  // Per thread: concurrent placements start their scans at different places.
  thread_local placement_rotation rotation;
  // An outside thread's CPU, on a real system only (rseq: no system call).
  const int cpu = self == nullptr && !worker_of_pu_.empty() ? ::sched_getcpu() : -1;
  return place_on(prio_, runtime_workers{workers_}, worker_of_pu_, priority, affinity,
                  self != nullptr ? self->id() : cpupri::none, cpu, rotation, continuation_of);
}

URT_HOT bool placement::caller_yields_to(unsigned w) const noexcept {
  if (!fair_workers_ || !on_callers_cpu(w)) return false;
  thread_local const bool fair_caller = ::sched_getscheduler(0) == SCHED_OTHER;
  return fair_caller;
}

}  // namespace urt::detail
