// placement: which worker a newly spawned task is queued on (the kernel's
// select_task_rq_rt). Reads cpupri and the workers' loads and parking
// flags, all racy by design: a stale read only makes one placement less
// balanced, and push migration corrects it once a worker drops below the
// task.
//
// Concurrency: place() may run on any thread concurrently with everything;
// it writes nothing shared (its rotation counters are thread-local).
#pragma once

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cpupri.hpp"
#include "urt/task.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class worker;

/// Where a placing thread's scans start; one per thread (placement keeps it
/// thread-local), so that concurrent placements spread.
struct placement_rotation {
  unsigned find = 0;    // cpupri::find's rotation
  unsigned remote = 0;  // the first worker of the least-loaded scan
};

/// The placement decision on any view of the workers: `workers.size()`,
/// `workers.load(w)` (accepted-but-unfinished tasks) and
/// `workers.parking(w)`. `self` is the spawning task's worker, or
/// cpupri::none for an outside thread; `worker_of_pu` maps a PU OS index to
/// its worker on a real system (empty otherwise). placement::place() runs
/// it on the runtime's workers, urt-cpupri-bench on synthetic ones.
///
/// select_task_rq_rt: stay on the spawning task's worker when it runs at a
/// lower priority; else the lowest-priority worker cpupri finds below the
/// task's; else queue it on the spawning task's worker (which is then
/// overloaded, and push migration moves the task as soon as some worker
/// drops below it); from an outside thread, the least-loaded worker in the
/// affinity.
template <class Workers>
unsigned place_on(const cpupri& prio, const Workers& workers,
                  std::span<const unsigned> worker_of_pu, priority_t priority,
                  const worker_set* affinity, unsigned self, placement_rotation& rot) noexcept {
  const auto n = static_cast<unsigned>(workers.size());
  if (n == 1) return 0;  // the only choice (a spec's affinity is checked before)
  const bool self_allowed =
      self < n && (affinity == nullptr || affinity->contains(self));
  if (self_allowed && prio.level(self) < priority) return self;
  // The caller's worker; for an outside thread, the worker on the CPU it
  // runs on when that worker is asleep, so that an idle pool wakes the
  // nearest worker (wake-affine: a wake-up on the caller's CPU is cheaper
  // than an IPI to another). An awake worker there would only compete with
  // the caller for its CPU, so then no worker is preferred.
  unsigned near = self < n ? self : cpupri::none;
  if (self >= n && !worker_of_pu.empty()) {
    const int cpu = ::sched_getcpu();
    if (cpu >= 0 && static_cast<std::size_t>(cpu) < worker_of_pu.size()) {
      const unsigned w = worker_of_pu[static_cast<std::size_t>(cpu)];
      if (w != cpupri::none && workers.parking(w)) near = w;
    }
  }
  const unsigned found = prio.find(priority, affinity, near, cpupri::none, rot.find++);
  if (found != cpupri::none) return found;
  if (self_allowed) return self;
  // The least-loaded worker in the affinity; the scan starts at a rotating
  // offset so that equally loaded workers take turns.
  const unsigned start = rot.remote++ % n;
  unsigned best = n;  // replaced by the first worker considered
  std::uint64_t best_load = 0;
  const auto consider = [&](unsigned w) {
    const std::uint64_t load = workers.load(w);
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

class placement {
 public:
  /// `workers` by id. On a real system `topo` maps each PU to its worker,
  /// so a spawn from an outside thread can prefer the worker on its CPU.
  placement(const cpupri& prio, std::span<const std::unique_ptr<worker>> workers,
            const urt::topology& topo);

  /// The worker to queue a task of `spec` on; `self` is the spawning task's
  /// worker, or nullptr for an outside thread.
  [[nodiscard]] unsigned place(const task_spec& spec, const worker* self) const noexcept;
  /// The same for a task of `priority` allowed on `affinity` (nullptr: any).
  [[nodiscard]] unsigned place(priority_t priority, const worker_set* affinity,
                               const worker* self) const noexcept;

 private:
  const cpupri& prio_;
  std::span<const std::unique_ptr<worker>> workers_;
  // PU OS index -> worker id (cpupri::none if no worker), on a real system
  // only: the worker an outside thread shares its CPU with.
  std::vector<unsigned> worker_of_pu_;
};

}  // namespace urt::detail
