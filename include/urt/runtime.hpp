// urt/runtime.hpp: the runtime, its options, spawning and stopping.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "urt/stats.hpp"
#include "urt/task.hpp"
#include "urt/timer.hpp"
#include "urt/topology.hpp"

namespace urt {

/// The OS scheduling policy of the worker threads.
enum class worker_policy : unsigned char {
  other,  ///< SCHED_OTHER: needs no privilege (the default)
  fifo,   ///< SCHED_FIFO at runtime_options::fifo_priority: needs CAP_SYS_NICE or root
};

/// Whether the runtime locks the process's memory (mlockall) when it starts.
enum class memory_lock : unsigned char {
  none,
  all,  ///< mlockall(MCL_CURRENT | MCL_FUTURE); never undone (it is process-wide)
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
  /// early and spin to the release (on the development VM about 1 us per
  /// release on average); the others start their release sooner by that
  /// median. worker_stats reports the advance and the time spun.
  adaptive,
};

/// How stop() treats tasks that are accepted but have not run.
enum class stop_mode : unsigned char {
  drain,   ///< run every accepted task, including ones spawned while draining
  cancel,  ///< let running tasks finish, drop the queued ones unrun and count them
};

/// Everything a runtime is built from. Aggregate: use designated initializers.
struct runtime_options {
  /// Where the topology comes from (this machine by default).
  topology_source topology = topology_source::system();
  /// cpulist of PU OS indexes that get a worker each ("0-3,8"); empty = all allowed.
  std::string cpus{};
  /// How long an idle worker spins looking for work before it parks on its
  /// doorbell. Spinning keeps a wake-up free of syscalls for bursty loads;
  /// parking frees the CPU. 0 parks at once. 50 us is provisional: on
  /// urt-spawn-bench (external spawns, 2 workers, 2 cores) 0 us gave 5.9-7.0
  /// M tasks/s, 10 us 7.1-8.1, 50 us 7.8-8.2, 200 us 6.3-8.6; the wake-up
  /// latency benchmark is where the default gets chosen for latency.
  std::chrono::nanoseconds idle_spin = std::chrono::microseconds{50};
  /// Whether idle_spin is spent every time or adapted (see spin_policy).
  spin_policy idle_spin_policy = spin_policy::adaptive;
  /// For timed releases: when a parked worker sets its alarm (see
  /// timer_wake). Overridden by a nonzero timer_spin.
  timer_wake_mode timer_wake = timer_wake_mode::adaptive;
  /// For timed releases: a fixed advance. Wake this long before every
  /// deadline and spin until it, so the release does not pay the wake-up
  /// latency of a parked thread (at the cost of up to that much CPU per
  /// release). 0 = off (timer_wake decides).
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
  /// migration. 100 us by measurement: on urt-migration-bench (2 workers,
  /// SCHED_FIFO, a hog that reaches a scheduling point every 20 us), a
  /// timeout of 5 / 20 / 50 / 100 / 200 us took over 88 / 77 / 45 / 14 / 15 %
  /// of the token hops; 100 us is the shortest at which a responsive holder
  /// serves nearly all of them itself, and it is also the longest a worker
  /// waits for a push before pulling.
  std::chrono::nanoseconds ipi_timeout = std::chrono::microseconds{100};
  /// OS policy of the worker threads.
  worker_policy policy = worker_policy::other;
  /// SCHED_FIFO priority of the workers when policy == fifo (1..99).
  int fifo_priority = 50;
  /// Lock all memory at start (avoid page faults in latency-critical tasks).
  memory_lock lock_memory = memory_lock::none;
  /// Called on the worker with the exception of a task that threw (inside
  /// it, this_task still describes the failed task). Empty: the runtime
  /// counts it and reports the first one per runtime on stderr. A throwing
  /// handler is counted and ignored.
  std::function<void(std::exception_ptr)> on_task_exception{};

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

  /// Throws std::invalid_argument naming the first bad field and its value.
  /// (The topology and cpulist are checked when they are loaded.)
  void validate() const;
};

/// Thrown by spawn once stop() has begun (for spawns from outside the
/// runtime's own tasks) or finished.
class runtime_stopped : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
struct task_node;
}

/// A pool of pinned worker threads running prioritized tasks, SCHED_FIFO
/// style: each worker runs its most urgent queued task next, first in first
/// out within a priority. Thread-safe: every member may be called from any
/// thread, except stop() and the destructor from inside a task.
class runtime {
 public:
  /// Validates the options, loads the topology and starts one worker per
  /// chosen PU, pinned to it on a real system. Throws std::invalid_argument
  /// naming a bad option, std::system_error when the OS refuses the policy,
  /// the binding or the memory lock (no worker is left running then).
  explicit runtime(runtime_options options = {});
  /// Drains: runs every accepted task, then joins the workers. Destroying
  /// a runtime from inside one of its own tasks aborts the process.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Queues `fn` to run once on a worker allowed by spec.affinity. Callable
  /// from any thread, including inside a task. Placement (the kernel's
  /// select_task_rq_rt): a spawn from a task stays on its worker when that
  /// worker runs at a lower priority; otherwise the task goes to the worker
  /// cpupri finds at the lowest priority below the task's (preferring the
  /// caller's LLC, then its NUMA node); when none is lower, queued on the
  /// spawning task's worker, or from another thread on the least loaded
  /// worker in the affinity; push migration moves it on once a worker drops
  /// below it. No heap allocation in steady state for callables of up to
  /// detail::inline_task_bytes. Throws std::invalid_argument for a bad spec
  /// and runtime_stopped after stop(); `fn` is then left untouched.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  void spawn(const task_spec& spec, F&& fn) {
    spawn_ticket ticket = begin_spawn(spec);
    ticket.payload()->emplace(std::forward<F>(fn));
    commit_spawn(ticket);
  }

  /// Queues `fn` to be released at `deadline` (at once if it has passed) on
  /// a worker allowed by spec.affinity; this_task::release_time() returns
  /// the deadline. Same errors and guarantees as spawn(). stop(drain) waits
  /// for pending deadlines; stop(cancel) drops them and counts them.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  void spawn_at(clock::time_point deadline, const task_spec& spec, F&& fn) {
    spawn_ticket ticket = begin_spawn(spec);
    ticket.payload()->emplace(std::forward<F>(fn));
    commit_timed(ticket, deadline, std::chrono::nanoseconds{0}, nullptr);
  }

  /// Runs `fn` periodically, drift-free: release k is start + k * period
  /// exactly (never "now + period"). After an overrun, `overrun` decides:
  /// catch_up runs the missed releases back to back, skip goes on with the
  /// first release not yet past (see overrun_policy). The series is one
  /// accepted task that ends at the handle's cancel() or at stop(). Throws
  /// std::invalid_argument for a period that is not positive or an unknown
  /// policy, as spawn() for the rest.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  periodic_task every(std::chrono::nanoseconds period, const task_spec& spec, F&& fn,
                      clock::time_point start = clock::now(),
                      overrun_policy overrun = overrun_policy::catch_up) {
    check_period(period);
    check_overrun(overrun);
    auto state = std::make_unique<detail::periodic_state>(overrun);  // before the callable is taken
    spawn_ticket ticket = begin_spawn(spec);
    ticket.payload()->emplace_repeating(std::forward<F>(fn));
    commit_timed(ticket, start, period, state.get());
    return periodic_task(state.release());
  }

  /// Stops the runtime and joins its workers. drain: runs every accepted
  /// task first and returns 0; cancel: lets running tasks finish, drops the
  /// queued ones and returns how many were dropped. A second call returns 0.
  /// Throws std::logic_error when called from inside one of its tasks.
  std::size_t stop(stop_mode mode = stop_mode::drain);

  /// Number of workers (fixed for the runtime's life).
  [[nodiscard]] std::size_t worker_count() const noexcept;
  /// The loaded topology and the place of every worker.
  [[nodiscard]] const urt::topology& topology() const noexcept;
  /// A snapshot of the per-worker counters.
  [[nodiscard]] runtime_stats stats() const;

 private:
  struct impl;

  // A node taken for one spawn: returned to the pool unless committed.
  class spawn_ticket {
   public:
    spawn_ticket(impl* rt, detail::task_node* node, unsigned target, bool local) noexcept
        : rt_(rt), node_(node), target_(target), local_(local) {}
    spawn_ticket(const spawn_ticket&) = delete;
    spawn_ticket& operator=(const spawn_ticket&) = delete;
    ~spawn_ticket();
    [[nodiscard]] detail::task_payload* payload() const noexcept;

   private:
    friend class runtime;
    impl* rt_;
    detail::task_node* node_;
    unsigned target_;
    bool local_;  // placed on the spawning task's own worker
  };

  spawn_ticket begin_spawn(const task_spec& spec);
  void commit_spawn(spawn_ticket& ticket) noexcept;
  void commit_timed(spawn_ticket& ticket, clock::time_point release,
                    std::chrono::nanoseconds period, detail::periodic_state* state) noexcept;
  static void check_period(std::chrono::nanoseconds period);
  static void check_overrun(overrun_policy overrun);

  std::unique_ptr<impl> impl_;
};

}  // namespace urt
