// urt/options.hpp: runtime_options, everything a runtime is built from, and
// the enums of its fields. Validated in one place (runtime_options::validate),
// which names the bad field and its value.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "urt/topology.hpp"

namespace urt {

/// How the priority-to-worker map (cpupri) is laid out in memory. Every
/// layout gives the same answers; they differ in what an update costs when
/// many workers update at once (see bench/cpupri_bench).
enum class cpupri_layout : std::uint8_t {
  global,         ///< one bitmask per level, atomic bit operations: the baseline
  per_numa,       ///< one bitmask per level per NUMA node
  per_llc,        ///< one cache-line-aligned bitmask per level per last-level cache
  per_llc_bytes,  ///< per LLC, one byte per worker, plain release stores (default)
};

/// The OS scheduling policy of the worker threads.
enum class worker_policy : unsigned char {
  other,  ///< SCHED_OTHER: needs no privilege (the default)
  fifo,   ///< SCHED_FIFO at runtime_options::fifo_priority: needs CAP_SYS_NICE or root
};

/// Whether the runtime locks the process's memory (mlockall) when it starts.
enum class memory_lock : unsigned char {
  none,
  /// mlockall(MCL_CURRENT | MCL_FUTURE) once every worker has started (their
  /// stacks locked too); never undone (it is process-wide). Refused, the
  /// constructor throws and nothing is locked.
  all,
};

/// What a worker does when it lowers its priority (its next task is less
/// urgent than the one that finished, or it goes idle) while some worker is
/// overloaded (has a queued task that could run elsewhere).
enum class migration_mode : unsigned char {
  /// One push token per runtime travels over the overloaded workers, each
  /// rung through its doorbell; each pushes its queued tasks to lower
  /// workers at its next scheduling point (the kernel's RT_PUSH_IPI). A
  /// worker that keeps the token past runtime_options::ipi_timeout has one
  /// task pulled from it and the token sent on. The default.
  push_ipi,
  /// The lowering worker locks the queue of every overloaded worker and
  /// takes the most urgent task it can run (the kernel before RT_PUSH_IPI;
  /// kept to compare: many lowering workers contend on one overloaded queue).
  pull,
  /// Nothing on lowering. Overloaded workers still push at their own
  /// scheduling points.
  none,
};

/// How long an idle worker spins before it parks (runtime_options::idle_spin_policy).
enum class spin_policy : unsigned char {
  /// Always idle_spin.
  fixed,
  /// At most idle_spin, adapted per worker as KVM adapts halt polling: the
  /// spin grows (doubling) while work arrives within idle_spin of the worker
  /// going idle and it parked too early to catch it, and halves (to 0) while
  /// work arrives later or only its own alarm wakes it, so a worker running
  /// only timed releases, or seeing sparse work, parks at once.
  adaptive,
};

/// When a parked worker sets its alarm for a timed release
/// (runtime_options::timer_wake).
enum class timer_wake_mode : unsigned char {
  /// At the release itself: the release starts as late as the OS wakes the
  /// worker (as the kernel's cyclictest measures it).
  at_release,
  /// Earlier by the worker's median wake-up lateness, learned from its own
  /// parked wake-ups (at most 100 us; the user-space analogue of KVM's
  /// adaptive lapic_timer_advance_ns). About half the wake-ups then come
  /// early and spin to the release; the others start their release sooner
  /// by that median. worker_stats reports the advance and the time spun
  /// (its cost on urt-cyclictest: bench/README.md).
  adaptive,
};

/// How a group's concurrency IDs (urt::this_task::cid()) return to the
/// group's pool (runtime_options::cid_mode). Both give every worker running
/// a task of the group an ID no other worker running the group holds, below
/// the number of workers, and both keep it across consecutive tasks of the
/// group at no cost (bench/README.md compares them).
enum class concurrency_id_mode : unsigned char {
  /// A worker keeps its ID of a group after it stops running the group
  /// (idle or another group), so that it finds it again for free. Batched
  /// compaction takes back the IDs of workers that have not run the group
  /// for cid_idle_threshold, and those above the number of IDs in use: each
  /// step visits cid_scan_batch workers, at scheduling points of workers
  /// running the group (rseq's mm_cid with the kernel's 2025 batched scan).
  /// The default.
  batched_scan,
  /// A worker holds an ID only while it runs the group and gives it back
  /// at the switch to another group or to idle; the next one it takes is
  /// the lowest free (the kernel's later ownership design, with workers as
  /// the CPUs that borrow IDs). No scan, an atomic operation on the
  /// group's shared bitmap at each switch.
  ownership,
};

/// What a worker does when its FIFO class (priorities 1..99) has spent its
/// runtime in the current period (runtime_options::bandwidth).
enum class throttle_mode : unsigned char {
  /// No budget: FIFO work may starve normal work (priority 0) forever.
  off,
  /// When normal work waits on the worker, FIFO is held back until the
  /// period ends (or the normal work runs out); with no normal work
  /// waiting FIFO runs on. Normal work gets at least period - runtime of
  /// every period in which it waits, and FIFO loses at most that much.
  deferred,
  /// FIFO stops on the worker until the period ends, even with nothing
  /// else to run (classic RT throttling).
  strict,
};

/// Each worker's budget for its FIFO class: at most `runtime` of FIFO time
/// in every `period`, accounted by the worker itself (no global state).
/// Tasks are cooperative: one picked inside the budget may run past it
/// (counted as overrun in worker_stats).
struct bandwidth_options {
  throttle_mode mode = throttle_mode::deferred;
  /// FIFO time per period: 0 <= runtime <= period, and not 0 under strict
  /// (FIFO tasks would never run).
  std::chrono::nanoseconds runtime = std::chrono::microseconds{9500};
  /// 0 < period <= max_period. 95% of a 10 ms period is the kernel's FIFO
  /// share (sched_rt_runtime_us / sched_rt_period_us) on a period 100x
  /// shorter: per-worker accounting costs nothing per period, and the
  /// blackout of FIFO work is at most period - runtime (0.5 ms), where the
  /// kernel's deferred server holds FIFO off for up to 50 ms. Chosen by
  /// urt-bandwidth-bench part (c): of 1, 10 and 100 ms at 95%, the longest
  /// period that kept the FIFO task's added max latency within 1 ms (10 ms:
  /// +35 us, 100 holds/s; 100 ms: +4.7 ms; bench/README.md).
  std::chrono::nanoseconds period = std::chrono::milliseconds{10};

  /// The longest period accepted (keeps the period arithmetic far from
  /// overflow).
  static constexpr std::chrono::nanoseconds max_period = std::chrono::hours{1};
};

/// Everything a runtime is built from. Aggregate: use designated initializers.
struct runtime_options {
  /// Where the topology comes from (this machine by default).
  topology_source topology = topology_source::system();
  /// cpulist of PU OS indexes that get a worker each ("0-3,8"); empty = all allowed.
  std::string cpus{};
  /// Which CPUs each worker thread may run on (see worker_binding): its own
  /// PU by default; llc when the CPUs are shared with other busy processes
  /// (bench/README.md, "worker binding").
  worker_binding binding = worker_binding::pu;
  /// How long an idle worker spins looking for work before it parks on its
  /// doorbell. Spinning keeps a wake-up free of syscalls for bursty loads;
  /// parking frees the CPU. 0 parks at once; at most max_wait. 50 us: the
  /// best external-spawn throughput of 0/10/50/200 us on urt-spawn-bench
  /// (bench/README.md).
  std::chrono::nanoseconds idle_spin = std::chrono::microseconds{50};
  /// Whether idle_spin is spent every time or adapted (see spin_policy).
  spin_policy idle_spin_policy = spin_policy::adaptive;
  /// For timed releases: when a parked worker sets its alarm (see
  /// timer_wake). Overridden by a nonzero timer_spin.
  timer_wake_mode timer_wake = timer_wake_mode::adaptive;
  /// For timed releases: a fixed advance. Wake this long before every
  /// deadline and spin until it, so the release does not pay the wake-up
  /// latency of a parked thread (at the cost of up to that much CPU per
  /// release). 0 = off (timer_wake decides); at most max_wait.
  std::chrono::nanoseconds timer_spin = std::chrono::nanoseconds{0};
  /// Memory layout of the priority-to-worker map that placement consults;
  /// all layouts place identically, per_llc_bytes updates cheapest (see
  /// bench/cpupri_bench).
  cpupri_layout cpupri = cpupri_layout::per_llc_bytes;
  /// What a worker that lowers its priority does about overloaded workers.
  migration_mode migration = migration_mode::push_ipi;
  /// push_ipi: how long the worker holding the push token may take to reach
  /// a scheduling point before a lowering or idle worker pulls one task from
  /// it and sends the token on, so that one long task cannot stall
  /// migration; also the longest a worker waits for a push before pulling.
  /// With io_poll_interval, it also says when an idle worker polls the
  /// reactor of a peer that has not looked into it (io_poll_interval +
  /// ipi_timeout: stuck in a task or not given a CPU) and pulls from it.
  /// Positive, at most max_wait. 100 us: the shortest at which a responsive
  /// holder served nearly all hops itself on urt-migration-bench
  /// (bench/README.md).
  std::chrono::nanoseconds ipi_timeout = std::chrono::microseconds{100};
  /// OS policy of the worker threads.
  worker_policy policy = worker_policy::other;
  /// SCHED_FIFO priority of the workers when policy == fifo (1..99).
  int fifo_priority = 50;
  /// Under policy == other (ignored under fifo, which has no slice): the
  /// time slice each worker asks of the kernel's fair scheduler
  /// (sched_setattr's sched_runtime; EEVDF custom slices, Linux 6.12 and
  /// later, which older kernels ignore). A short slice gives the worker an
  /// early deadline, so a worker woken by a spawn preempts the SCHED_OTHER
  /// thread on its CPU (often the spawner) at once instead of waiting for
  /// it to block; the thread it preempts pays. 0: nothing is asked (the
  /// kernel's default, 0.7 ms scaled by the CPU count); else min_os_slice
  /// to max_os_slice. Where the call is refused as unknown or filtered
  /// (ENOSYS, EPERM), the workers keep the default slice. Off by default:
  /// it sped up wake-ups, but the mixed workload's worst urgent start
  /// reached 0.78 and 2.2 ms in 2 of 24 rounds at 100 us, against 0.29 ms
  /// at most in 24 without (bench/README.md, "os_slice: off").
  std::chrono::nanoseconds os_slice{0};
  /// The kernel's bounds for a custom slice (0.1 ms to 100 ms).
  static constexpr std::chrono::nanoseconds min_os_slice = std::chrono::microseconds{100};
  static constexpr std::chrono::nanoseconds max_os_slice = std::chrono::milliseconds{100};
  /// Whether the worker threads block the asynchronous signals (SIGINT,
  /// SIGTERM, SIGHUP, SIGUSR1/2, SIGALRM, SIGCHLD, the real-time signals...),
  /// so that the kernel gives them to the application's own threads and a
  /// handler never interrupts a task, as Asio's thread_pool does for its
  /// threads. Faults, SIGABRT, SIGPIPE, SIGXFSZ and SIGPROF stay unblocked.
  /// asio::signal_set works either way. Off: the workers keep the mask of
  /// the thread that made the runtime.
  bool block_signals = true;
  /// Lock all memory at start (avoid page faults in latency-critical tasks).
  memory_lock lock_memory = memory_lock::none;
  /// Each worker's FIFO budget, so that normal work on it is not starved.
  bandwidth_options bandwidth{};
  /// How concurrency IDs return to their group's pool (see concurrency_id_mode).
  concurrency_id_mode cid_mode = concurrency_id_mode::batched_scan;
  /// batched_scan: an ID of a worker that has not run the group for this
  /// long is reclaimed by the next compaction step that visits it. 0 <= t <=
  /// max_cid_time. 100 ms, the kernel's (SCHED_MM_CID_PERIOD_NS).
  std::chrono::nanoseconds cid_idle_threshold = std::chrono::milliseconds{100};
  /// batched_scan: workers one compaction step visits, 1..max_workers. 16,
  /// the kernel's choice after measuring 8, 16 and 32.
  unsigned cid_scan_batch = 16;
  /// batched_scan: a full pass over the workers starts at most this often
  /// (its steps follow at the next scheduling points). 0 <= t <=
  /// max_cid_time. 100 ms, the kernel's (MM_CID_SCAN_DELAY).
  std::chrono::nanoseconds cid_scan_interval = std::chrono::milliseconds{100};
  /// Worker-owned I/O (urt/executor.hpp): while a worker has I/O
  /// outstanding (a socket or timer operation started through one of its
  /// executors), it polls its reactor at a scheduling point (between two
  /// tasks, in preempt_point(), while spinning idle) when at least this long
  /// has passed since its last poll; parked, it waits in the reactor itself.
  /// A completion that arrives while a task runs is taken in at the first
  /// scheduling point this long after the last poll: the next one after any
  /// task that ran that long. A poll is one epoll_wait syscall, so the
  /// interval bounds its cost between short tasks (bench/README.md). 0
  /// polls at every scheduling point; 0 <= t <= max_wait. No I/O
  /// outstanding: no polling and no cost.
  std::chrono::nanoseconds io_poll_interval = std::chrono::microseconds{10};
  /// Worker-owned I/O: whether a busy worker first reads from memory if its
  /// reactor has had an event since its last poll, and skips the poll's
  /// system call when it has not (true). Each worker keeps an io_uring of
  /// its own with one poll of its reactor's epoll descriptor armed, which
  /// the kernel marks at the event (DESIGN.md, "Worker-owned I/O"). A poll
  /// still comes every 8 io_poll_intervals without an event, for what
  /// Asio queues without one (an operation that completed when it was
  /// started). The ring's work runs only inside those polls, so a task's
  /// own system calls never see it. Where the kernel refuses io_uring
  /// (before Linux 6.1, or disabled), or with false, every poll is a
  /// system call, as before.
  bool io_ready_ring = true;
  /// Called on the worker with the exception of a task that threw (inside
  /// it, this_task still describes the failed task). Empty: the runtime
  /// counts it and reports the first one per runtime on stderr. Either way
  /// the task's exception is counted (worker_stats::exceptions); what the
  /// handler itself throws is ignored, not counted.
  std::function<void(std::exception_ptr)> on_task_exception{};

  /// The longest idle_spin, timer_spin, ipi_timeout and io_poll_interval
  /// validate() accepts.
  /// They are windows of microseconds; a second is far beyond any useful
  /// one (a longer value is most likely a unit mistake), and the bound
  /// keeps every deadline computed from them (now + window, a release -
  /// window) far inside the clock's range, so none can overflow.
  static constexpr std::chrono::nanoseconds max_wait = std::chrono::seconds{1};

  /// The longest cid_idle_threshold and cid_scan_interval accepted.
  static constexpr std::chrono::nanoseconds max_cid_time = std::chrono::hours{1};

  /// Every allowed PU of this machine, SCHED_OTHER, no memory locking.
  static runtime_options all_cores() { return {}; }
  /// Every allowed PU, SCHED_FIFO at `os_priority`, memory locked.
  static runtime_options realtime(int os_priority = 50) {
    runtime_options o;
    o.policy = worker_policy::fifo;
    o.fifo_priority = os_priority;
    o.lock_memory = memory_lock::all;
    return o;
  }

  /// Throws std::invalid_argument naming the first bad field and its value
  /// (runtime/options.cpp). The topology and cpulist are checked when they
  /// are loaded.
  void validate() const;
};

}  // namespace urt
