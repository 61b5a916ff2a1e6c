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

/// The worker bound to CPU `cpu` in `worker_of_pu` (a PU OS index -> worker
/// map, empty off a real system), or cpupri::none (no such CPU, or -1).
[[nodiscard]] inline unsigned worker_of_cpu(std::span<const unsigned> worker_of_pu,
                                            int cpu) noexcept {
  return cpu >= 0 && static_cast<std::size_t>(cpu) < worker_of_pu.size()
             ? worker_of_pu[static_cast<std::size_t>(cpu)]
             : cpupri::none;
}

/// How many more tasks than the worker on an outside caller's own CPU the
/// least-loaded other worker may hold before that worker takes the task
/// after all (place_on(), below). Measured in bench/README.md ("urt-peers
/// (a): the quick pick, kept"): with 1,024 the 10,000 tasks of urt-peers
/// (d) spilled onto the caller's CPU's worker and the urgent task's start
/// went above 75 us in 5-49 of 200 samples per process (0-2 before); with
/// no limit a flood of a million tasks from one thread outran the one
/// worker taking them and the node pool's cap (96,000-124,000 heap nodes).
inline constexpr std::uint64_t caller_cpu_margin = 8192;

/// For place_on()'s `continuation_of`: the spawn is not a continuation.
inline constexpr priority_t no_continuation = -1;

/// Whether a continuation of `priority` from a task at `continuation_of`
/// stays on the caller's worker (place_on(), below), the affinity allowing.
[[nodiscard]] constexpr bool continuation_stays(priority_t priority,
                                                priority_t continuation_of) noexcept {
  return continuation_of != no_continuation && priority <= continuation_of;
}

/// place_on()'s choice for an outside caller whose CPU's worker `mine` is
/// awake and a candidate (at `mine_level`, below `priority`): one of the
/// others at its level or lower (one at its level only when that one is
/// not itself being woken), else `mine`; cpupri::none when a peer level
/// with it is being woken, and cpupri's plain answer decides. Out of line:
/// inlined, it made every external spawn's place_on() larger (callgrind,
/// two workers: 787 instructions a spawn with it inline, 757 without).
template <class Workers>
[[gnu::noinline]] unsigned mate_or_peer(const cpupri& prio, const Workers& workers,
                                        priority_t priority, const worker_set* affinity,
                                        unsigned mine, int mine_level, unsigned rotation) noexcept {
  const unsigned other = prio.find_other(priority, affinity, mine, rotation);
  if (other == cpupri::none) return mine;
  const int other_level = prio.level(other);
  if (other_level > mine_level) return mine;
  if (other_level < mine_level || !workers.parking(other)) return other;
  return cpupri::none;
}

/// The placement decision on any view of the workers: `workers.size()`,
/// `workers.load(w)` (accepted-but-unfinished tasks), `workers.parking(w)`
/// (parked, or rung and not running yet) and `workers.asleep(w)` (parked,
/// not rung yet). `self` is the spawning task's worker, or
/// cpupri::none for an outside thread; `worker_of_pu` maps a PU OS index to
/// its worker on a real system (empty otherwise), and `caller_cpu` is the
/// CPU an outside caller runs on (-1: unknown). placement::place() runs it
/// on the runtime's workers, urt-cpupri-bench and the tests on synthetic
/// ones.
///
/// A continuation (asio::defer from a task: relationship.continuation) no
/// more urgent than its caller stays on the caller's worker when the
/// affinity allows it: `continuation_of` is the calling task's priority, or
/// no_continuation for any other spawn. That worker runs it once the
/// caller returns unless something more urgent is queued there, and push
/// migration moves it on if the worker stays busy. Placement could pick an
/// idle worker and ring it, to take a task the caller's worker is about to
/// be free for: a hop and a wake-up, which Asio's own schedulers avoid by
/// keeping continuations on the calling thread. One more urgent than its
/// caller is placed as any spawn is: strict priority wants it started now,
/// not when the caller gets round to returning.
///
/// Otherwise, select_task_rq_rt: stay on the spawning task's worker when it runs at a
/// lower priority; else the lowest-priority worker cpupri finds below the
/// task's; else queue it on the spawning task's worker (which is then
/// overloaded, and push migration moves the task as soon as some worker
/// drops below it); from an outside thread, the least-loaded worker in the
/// affinity.
///
/// An outside caller's own CPU: its worker, when asleep, is preferred
/// (wake-affine: a wake-up there is cheaper than an IPI to another CPU).
/// Otherwise it is not running now, since the caller is: a task queued
/// there waits until the caller blocks or the OS switches them (up to a
/// time slice), while an awake worker on another CPU takes it at its next
/// scheduling point. So such a worker, at the same cpupri level or lower,
/// is preferred to it (not one that is parked or being woken). In the
/// least-loaded choice, too, it comes last: it takes the task only when
/// every other allowed worker holds caller_cpu_margin more tasks than it.
/// Queued there, a burst from the caller waited for the caller's CPU, and
/// a peer pushing to that worker or claiming from it spun on its queue
/// lock while the OS had preempted it inside a step (bench/README.md).
template <class Workers>
unsigned place_on(const cpupri& prio, const Workers& workers,
                  std::span<const unsigned> worker_of_pu, priority_t priority,
                  const worker_set* affinity, unsigned self, int caller_cpu,
                  placement_rotation& rot,
                  priority_t continuation_of = no_continuation) noexcept {
  const auto n = static_cast<unsigned>(workers.size());
  if (n == 1) return 0;  // the only choice (a spec's affinity is checked before)
  const bool self_allowed =
      self < n && (affinity == nullptr || affinity->contains(self));
  if (self_allowed && continuation_stays(priority, continuation_of)) return self;
  if (self_allowed && prio.level(self) < priority) return self;
  // The caller's worker; for an outside thread, the worker on its CPU.
  unsigned near = self < n ? self : cpupri::none;
  const unsigned mine = self >= n ? worker_of_cpu(worker_of_pu, caller_cpu) : cpupri::none;
  const bool has_mine = mine != cpupri::none && mine < n;
  if (has_mine && workers.asleep(mine)) near = mine;
  const unsigned rotation = rot.find++;
  if (has_mine && near != mine && (affinity == nullptr || affinity->contains(mine))) {
    // The caller's own CPU's worker, not asleep (see above), is a
    // candidate: an awake one elsewhere at its level or lower is preferred,
    // if the affinity has one. The others are searched first, so that the
    // common answers (one of them, or this worker) take one search.
    if (const int mine_level = prio.level(mine); mine_level < priority) {
      const unsigned w =
          mate_or_peer(prio, workers, priority, affinity, mine, mine_level, rotation);
      if (w != cpupri::none) return w;
    }
  }
  const unsigned found = prio.find(priority, affinity, near, cpupri::none, rotation);
  if (found != cpupri::none) return found;
  if (self_allowed) return self;
  // The least-loaded worker in the affinity; the scan starts at a rotating
  // offset so that equally loaded workers take turns.
  const unsigned start = rot.remote++ % n;
  unsigned best = n;  // replaced by the first worker considered
  std::uint64_t best_load = 0;
  const auto consider = [&](unsigned w) {
    if (w == mine) return false;  // not running now (see above): settled last
    const std::uint64_t load = workers.load(w);
    if (best == n || load < best_load) {
      best = w;
      best_load = load;
    }
    return load == 0;  // an idle worker cannot be beaten
  };
  // The caller's own CPU's worker (above) only when no other is allowed,
  // or every other one holds caller_cpu_margin more tasks than it.
  const auto settle = [&] {
    if (best == n) return mine;
    const bool mine_allowed =
        mine != cpupri::none && mine < n && (affinity == nullptr || affinity->contains(mine));
    return mine_allowed && workers.load(mine) + caller_cpu_margin < best_load ? mine : best;
  };
  if (affinity == nullptr) {
    for (unsigned i = 0; i < n; ++i) {
      if (consider((start + i) % n)) break;
    }
    return settle();
  }
  const worker_set& allowed = *affinity;
  for (unsigned w = allowed.next(start); w < n; w = allowed.next(w + 1)) {
    if (consider(w)) return w;
  }
  for (unsigned w = allowed.first(); w < start; w = allowed.next(w + 1)) {
    if (consider(w)) return w;
  }
  return settle();
}

class placement {
 public:
  /// `workers` by id. On a real system with workers bound to their own PU
  /// `topo` maps each PU to its worker, so a spawn from an outside thread
  /// can prefer the worker on its CPU (a worker bound more widely may be
  /// anywhere: no such preference).
  placement(const cpupri& prio, std::span<const std::unique_ptr<worker>> workers,
            const urt::topology& topo, worker_binding binding, worker_policy policy);

  /// The worker to queue a task of `spec` on; `self` is the spawning task's
  /// worker, or nullptr for an outside thread.
  [[nodiscard]] unsigned place(const task_spec& spec, const worker* self) const noexcept;
  /// The same for a task of `priority` allowed on `affinity` (nullptr: any);
  /// `continuation_of`: the calling task's priority when the spawn is its
  /// continuation (place_on()), else no_continuation.
  [[nodiscard]] unsigned place(priority_t priority, const worker_set* affinity,
                               const worker* self,
                               priority_t continuation_of = no_continuation) const noexcept;
  /// An outside thread whose spawn of a task at 1..99 (not timed) has just
  /// woken worker w: whether it should yield its CPU to w. Yes when w is
  /// bound to the caller's CPU now (a real system under binding pu: the
  /// worker the wake-affine choice above prefers while it sleeps), the
  /// workers are SCHED_OTHER and so is the caller. The kernel would preempt
  /// a SCHED_OTHER waker for a woken SCHED_FIFO task; here both threads are
  /// SCHED_OTHER, and the OS lets the waker run on in about two wake-ups of
  /// three, the worker waiting until the waker blocks or its slice ends (up
  /// to a tick, 4 ms here; bench/README.md). Yielding, the caller lets the
  /// task start now and gets its CPU back when the worker idles. A
  /// SCHED_FIFO or SCHED_RR caller is not asked to: its yield would hand
  /// the CPU to its own priority's threads, not to the worker. The caller's
  /// policy is read once per thread (a system call each time cost the
  /// wake-up half a microsecond).
  [[nodiscard]] bool caller_yields_to(unsigned w) const noexcept;
  /// Whether worker w is bound to the calling thread's CPU now (a real
  /// system under binding pu). The caller runs there, so w does not: a
  /// task queued on w waits for the caller to block or for the OS to
  /// switch them, however awake w's doorbell says it is. A spawn of a task
  /// at 1..99 onto it then raises a reschedule request (resched.hpp), so
  /// that another worker that steps first runs it (tests/unit/
  /// resched_live_test.cpp: a caller that keeps that CPU had its urgent
  /// task wait about a second for the worker before).
  [[nodiscard]] bool on_callers_cpu(unsigned w) const noexcept {
    return !worker_of_pu_.empty() && worker_of_cpu(worker_of_pu_, ::sched_getcpu()) == w;
  }

 private:
  const cpupri& prio_;
  std::span<const std::unique_ptr<worker>> workers_;
  // PU OS index -> worker id (cpupri::none if no worker), on a real system
  // only: the worker an outside thread shares its CPU with.
  std::vector<unsigned> worker_of_pu_;
  const bool fair_workers_;  // worker_policy::other
};

}  // namespace urt::detail
