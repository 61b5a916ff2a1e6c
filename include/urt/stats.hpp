// urt/stats.hpp: counter snapshots.
#pragma once

#include <cstdint>
#include <vector>

namespace urt {

/// One worker's counters. Each is monotonic but `accepted`, which counts a
/// spawn before it is complete: one whose callable's construction throws,
/// or that a stop() beginning at that moment refuses, is counted and taken
/// back. A snapshot reads them with relaxed loads, so counters of a busy
/// runtime may be mutually a little stale, but every one is a value it
/// really had.
struct worker_stats {
  unsigned worker = 0;
  unsigned pu = 0;                   ///< OS index of its PU (its home PU under binding llc/workers)
  std::uint64_t accepted = 0;        ///< tasks placed on this worker
  /// Tasks run to the end (or to a throw); a periodic series counts once,
  /// when it ends (cancel() or stop(drain)), also if it never ran.
  std::uint64_t completed = 0;
  std::uint64_t cancelled = 0;       ///< tasks dropped unrun by stop(cancel)
  std::uint64_t exceptions = 0;      ///< task runs that threw (every release of a series counts)
  std::uint64_t parks = 0;           ///< times the worker slept on its doorbell
  std::uint64_t doorbells = 0;       ///< doorbell rings that woke it (received)
  std::uint64_t doorbells_sent = 0;  ///< rings it (or its tasks) sent to other workers
  std::uint64_t pushes = 0;          ///< tasks it pushed to lower workers
  std::uint64_t pulls = 0;           ///< tasks it pulled from overloaded workers
  std::uint64_t token_hops = 0;      ///< push-token hops it sent
  std::uint64_t fallbacks = 0;       ///< stuck token hops it took over (ipi_timeout)
  /// inboxes of workers stuck past ipi_timeout that it took in for them
  std::uint64_t take_overs = 0;
  /// tasks it pulled at once, without waiting ipi_timeout for a push, from
  /// a worker found stuck or late before (a stuck hop or inbox, or a
  /// reschedule request claimed for it) that has taken no scheduling point
  /// since (also counted in `pulls`)
  std::uint64_t stuck_pulls = 0;
  /// reschedule requests it claimed: an urgent task queued behind another
  /// worker's running task, pulled here (at most one task per claim)
  std::uint64_t resched_claims = 0;
  /// tasks it took after a task at the same priority without a full
  /// scheduling step (nothing else for the step to do)
  std::uint64_t quick_picks = 0;
  /// outside spawns of a task at priority 1..99 that woke it on the
  /// spawning thread's own CPU, where the spawner then yielded the CPU to
  /// it (worker_policy::other only)
  std::uint64_t wake_yields = 0;
  std::uint64_t migrated_in = 0;     ///< tasks moved into its queue by a push or pull
  std::uint64_t migrated_out = 0;    ///< tasks moved out of its queue
  std::uint64_t remote_locks = 0;    ///< times other workers locked its queue
  std::uint64_t timer_spin_ns = 0;   ///< time spun waiting for timed releases (timer_wake, timer_spin)
  /// Not a counter: how long before a release its alarm is set now (the
  /// learned advance with timer_wake::adaptive, else timer_spin or 0).
  /// total() keeps the largest.
  std::uint64_t timer_advance_ns = 0;
  /// Not a counter: how long it spins when it goes idle now (idle_spin, or
  /// the adapted spin with spin_policy::adaptive). total() keeps the largest.
  std::uint64_t idle_spin_ns = 0;
  // The FIFO budget (runtime_options::bandwidth; all 0 when it is off):
  // time by class as the worker accounted it at its scheduling points,
  // which add up to the time it has been running.
  std::uint64_t fifo_ns = 0;          ///< running FIFO tasks (priorities 1..99)
  std::uint64_t normal_ns = 0;        ///< running normal tasks (priority 0)
  std::uint64_t idle_ns = 0;          ///< running nothing
  std::uint64_t throttle_events = 0;  ///< times FIFO was held back, its budget spent
  /// Time FIFO was held back: a hold in progress counts up to the worker's
  /// last scheduling point (a worker with nothing else to run sleeps until
  /// the period ends, and counts its hold then); a hold ends at the
  /// period's end, a budget change, or once stop() began.
  std::uint64_t throttled_ns = 0;
  std::uint64_t server_slices = 0;    ///< normal tasks run while FIFO was held back
  std::uint64_t overrun_ns = 0;       ///< FIFO time past the budget by tasks started inside it
  std::uint64_t overrun_events = 0;   ///< tasks that ran past the budget
  // Worker-owned I/O (urt/executor.hpp, runtime_options::io_poll_interval):
  std::uint64_t io_polls = 0;     ///< reactor polls at scheduling points (parked waits not counted)
  std::uint64_t io_handlers = 0;  ///< completions taken in, by those polls and parked waits
  std::uint64_t io_rescued = 0;   ///< completions this worker took from a stuck peer's reactor
  /// Polls skipped at scheduling points: the ready ring showed no event
  /// (runtime_options::io_ready_ring; stays 0 where the kernel refused it).
  std::uint64_t io_ring_skips = 0;
  /// Not a counter: why this worker's ready ring is off, an errno value
  /// (ENOSYS, EPERM or EINVAL where the kernel, its io_uring_disabled
  /// setting or a seccomp filter refuses io_uring or a flag the ring needs:
  /// Linux 6.1 or later), or -1 where the kernel ended the ring's poll
  /// without one; the worker then polls on its interval. 0 while the ring
  /// is in use or with io_ready_ring = false. total() keeps the first
  /// worker's that is not 0.
  int io_ring_error = 0;

  worker_stats& operator+=(const worker_stats& o) noexcept {
    accepted += o.accepted;
    completed += o.completed;
    cancelled += o.cancelled;
    exceptions += o.exceptions;
    parks += o.parks;
    doorbells += o.doorbells;
    doorbells_sent += o.doorbells_sent;
    pushes += o.pushes;
    pulls += o.pulls;
    token_hops += o.token_hops;
    fallbacks += o.fallbacks;
    take_overs += o.take_overs;
    stuck_pulls += o.stuck_pulls;
    resched_claims += o.resched_claims;
    quick_picks += o.quick_picks;
    wake_yields += o.wake_yields;
    migrated_in += o.migrated_in;
    migrated_out += o.migrated_out;
    remote_locks += o.remote_locks;
    timer_spin_ns += o.timer_spin_ns;
    fifo_ns += o.fifo_ns;
    normal_ns += o.normal_ns;
    idle_ns += o.idle_ns;
    throttle_events += o.throttle_events;
    throttled_ns += o.throttled_ns;
    server_slices += o.server_slices;
    overrun_ns += o.overrun_ns;
    overrun_events += o.overrun_events;
    io_polls += o.io_polls;
    io_handlers += o.io_handlers;
    io_rescued += o.io_rescued;
    io_ring_skips += o.io_ring_skips;
    timer_advance_ns = timer_advance_ns > o.timer_advance_ns ? timer_advance_ns : o.timer_advance_ns;
    idle_spin_ns = idle_spin_ns > o.idle_spin_ns ? idle_spin_ns : o.idle_spin_ns;
    if (io_ring_error == 0) io_ring_error = o.io_ring_error;
    return *this;
  }
};

/// A snapshot of every worker's counters.
struct runtime_stats {
  std::vector<worker_stats> workers;

  /// The sum over all workers (worker and pu are left 0; timer_advance_ns
  /// and idle_spin_ns are the largest, io_ring_error the first not 0).
  [[nodiscard]] worker_stats total() const noexcept {
    worker_stats sum;
    for (const auto& w : workers) sum += w;
    return sum;
  }
};

}  // namespace urt
