// placement: which worker a newly spawned task is queued on (the kernel's
// select_task_rq_rt). Reads cpupri and the workers' loads and parking
// flags, all racy by design: a stale read only makes one placement less
// balanced, and push migration corrects it once a worker drops below the
// task.
//
// Concurrency: place() may run on any thread concurrently with everything;
// it writes nothing shared (its rotation counters are thread-local).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cpupri.hpp"
#include "urt/task.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class worker;

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
  // The least-loaded worker in the affinity (nullptr: any).
  [[nodiscard]] unsigned place_remote(const worker_set* affinity) const noexcept;

  const cpupri& prio_;
  std::span<const std::unique_ptr<worker>> workers_;
  // PU OS index -> worker id (cpupri::none if no worker), on a real system
  // only: the worker an outside thread shares its CPU with.
  std::vector<unsigned> worker_of_pu_;
};

}  // namespace urt::detail
