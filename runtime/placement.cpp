#include "placement.hpp"

#include <sched.h>

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
                     const urt::topology& topo, worker_binding binding)
    : prio_(prio), workers_(workers) {
  if (!topo.is_this_system() || binding != worker_binding::pu) return;
  for (const worker_place& p : topo.workers()) {
    if (p.pu >= worker_of_pu_.size()) worker_of_pu_.resize(p.pu + 1, cpupri::none);
    worker_of_pu_[p.pu] = p.worker;
  }
}

unsigned placement::place(const task_spec& spec, const worker* self) const noexcept {
  return place(spec.priority, spec.affinity ? &*spec.affinity : nullptr, self);
}

unsigned placement::place(priority_t priority, const worker_set* affinity, const worker* self,
                          priority_t continuation_of) const noexcept {
  // Per thread: concurrent placements start their scans at different places.
  thread_local placement_rotation rotation;
  // An outside thread's CPU, on a real system only (rseq: no system call).
  const int cpu = self == nullptr && !worker_of_pu_.empty() ? ::sched_getcpu() : -1;
  return place_on(prio_, runtime_workers{workers_}, worker_of_pu_, priority, affinity,
                  self != nullptr ? self->id() : cpupri::none, cpu, rotation, continuation_of);
}

bool placement::on_callers_cpu(unsigned w) const noexcept {
  if (worker_of_pu_.empty()) return false;
  const int cpu = ::sched_getcpu();
  return cpu >= 0 && static_cast<std::size_t>(cpu) < worker_of_pu_.size() &&
         worker_of_pu_[static_cast<std::size_t>(cpu)] == w;
}

}  // namespace urt::detail
