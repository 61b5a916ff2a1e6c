// urt/runtime.hpp: the runtime, spawning and stopping (its options: urt/options.hpp).
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

#include "urt/group.hpp"
#include "urt/options.hpp"
#include "urt/stats.hpp"
#include "urt/task.hpp"
#include "urt/timer.hpp"
#include "urt/topology.hpp"

namespace asio {
class io_context;
}

namespace urt {

class executor;  // urt/executor.hpp

/// How stop() treats tasks that are accepted but have not run.
enum class stop_mode : unsigned char {
  drain,   ///< run every accepted task, including ones spawned while draining
  cancel,  ///< let running tasks finish, drop the queued ones unrun and count them
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

template <class T>
class per_cid;

/// A pool of pinned worker threads running prioritized tasks, SCHED_FIFO
/// style: each worker runs its most urgent queued task next, first in first
/// out within a priority. Thread-safe: every member may be called from any
/// thread, except stop() and the destructor from inside a task.
class runtime {
 public:
  /// Validates the options, loads the topology and starts one worker per
  /// chosen PU, pinned to it on a real system; returns once every worker
  /// is idle and placement sees it so. Throws std::invalid_argument
  /// naming a bad option, std::system_error when the OS refuses the policy,
  /// the binding, the memory lock or a thread (no worker is left running
  /// then, and nothing locked).
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
  ///
  /// Order: among tasks queued on one worker, the most urgent runs first,
  /// and within a priority they run in the order their spawn() calls
  /// returned, whether they came from other threads or from tasks on that
  /// worker, for every pair of spawns whose order the callers could observe
  /// (one returned before the other began). A task moved to another worker
  /// by migration runs in that worker's order from then on. A spawner the
  /// OS preempts inside spawn() delays only its own task: the others'
  /// spawns are in the worker's reach once they return (DESIGN.md,
  /// invariant 8).
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  void spawn(const task_spec& spec, F&& fn) {
    spawn_ticket ticket = begin_spawn(spec, "runtime::spawn");
    ticket.payload()->emplace(std::forward<F>(fn));
    commit_spawn(ticket);
  }

  /// Queues `fn` to be released at `deadline` (at once if it has passed) on
  /// a worker allowed by spec.affinity; this_task::release_time() returns
  /// the deadline. Same errors and guarantees as spawn(), and
  /// std::invalid_argument for clock::time_point::max(), a deadline that
  /// never comes. stop(drain), and so the destructor, waits for pending
  /// deadlines however far ahead (one a year ahead blocks it for a year);
  /// stop(cancel) drops them and counts them. The release waits for a
  /// scheduling point of the worker it was placed on: a worker stuck in a
  /// long task delays it (no other worker takes timed nodes in).
  ///
  /// Order within a priority: a deadline already passed when spawn_at() is
  /// called queues the task as a spawn() made then. A later one (also one
  /// that passes while the task is on its way to its worker) queues it at
  /// the worker's first scheduling point that begins at or after the
  /// deadline, behind the spawns that point takes in; releases due at the
  /// same point queue in deadline order, equal deadlines in the order the
  /// worker took them in (for one caller, the order of its calls; for
  /// series of one period and start, the order they were made).
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  void spawn_at(clock::time_point deadline, const task_spec& spec, F&& fn) {
    check_deadline(deadline);
    spawn_ticket ticket = begin_spawn(spec, "runtime::spawn_at");
    ticket.payload()->emplace(std::forward<F>(fn));
    commit_timed(ticket, deadline, std::chrono::nanoseconds{0}, nullptr);
  }

  /// Runs `fn` periodically, drift-free: release k is start + k * period
  /// exactly (never "now + period"). After an overrun, `overrun` decides:
  /// catch_up runs the missed releases back to back, skip goes on with the
  /// first release not yet past (see overrun_policy). The series is one
  /// accepted task that ends at the handle's cancel() or at stop(); once
  /// stop() began, a series whose next release is not queued yet ends
  /// without it (one made during a drain may never run). Throws
  /// std::invalid_argument for a period that is not positive, a start of
  /// time_point::max() (it never comes, as for spawn_at) or an unknown
  /// policy, as spawn() for the rest.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F&&>
  periodic_task every(std::chrono::nanoseconds period, const task_spec& spec, F&& fn,
                      clock::time_point start = clock::now(),
                      overrun_policy overrun = overrun_policy::catch_up) {
    check_period(period);
    check_start(start);
    check_overrun(overrun);
    auto state = std::make_unique<detail::periodic_state>(overrun);  // before the callable is taken
    spawn_ticket ticket = begin_spawn(spec, "runtime::every");
    ticket.payload()->emplace_repeating(std::forward<F>(fn));
    commit_timed(ticket, start, period, state.get());
    return periodic_task(state.release());
  }

  /// Stops the runtime and joins its workers. drain: runs every accepted
  /// task first and returns 0 (budgets hold nothing back once the stop
  /// began: FIFO work a budget holds runs at once, and the time tasks run
  /// from then on is not counted in the budgets' stats); cancel: lets running
  /// tasks finish, drops the queued ones and returns how many were dropped.
  /// A second call returns 0 once the first has finished (a call made
  /// while another runs waits for it: a stop(cancel) does not cut a
  /// running stop(drain) short).
  /// Throws std::invalid_argument, before stopping anything, for a `mode`
  /// that is not a stop_mode, and std::logic_error when called from inside
  /// one of its tasks.
  std::size_t stop(stop_mode mode = stop_mode::drain);

  /// Changes every worker's FIFO budget (runtime_options::bandwidth) while
  /// the runtime runs; any thread. Each worker takes it at its next
  /// scheduling point and starts a new period there, so it holds within one
  /// period; a worker idle until its held FIFO work's period ends is woken
  /// to take it at once (a lifted budget runs that work now). Setting the
  /// values it already has changes nothing (no new period). Throws
  /// std::invalid_argument naming the bad field and value, runtime_stopped
  /// once stop() has begun.
  void set_bandwidth(const bandwidth_options& opts);

  /// A new task group, with its own FIFO budget per worker when
  /// opts.budget is set; any thread. Throws std::invalid_argument naming a
  /// bad field, std::length_error once max_groups exist, runtime_stopped
  /// once stop() has begun.
  group make_group(const group_options& opts);
  /// Gives group `g` a budget, changes it, or (nullopt) removes it, while
  /// the runtime runs; takes effect as set_bandwidth() does, for `g` alone:
  /// other groups' budgets and the runtime-wide one keep their periods. A
  /// budget removed and given back later starts afresh (the time between
  /// is not measured). Same errors, and std::invalid_argument for a group
  /// of another runtime.
  void set_bandwidth(group g, std::optional<group_budget> budget);
  /// A snapshot of group `g`'s counters, summed over the workers.
  [[nodiscard]] group_stats stats(group g) const;

  /// An Asio executor whose tasks get `spec` (include urt/executor.hpp to
  /// use it): its home worker, whose io_context is its execution context,
  /// is the calling worker when called from a task on a worker spec allows,
  /// else the lowest worker spec allows. Throws std::invalid_argument for a
  /// bad spec, runtime_stopped once stop() has begun, std::length_error
  /// after max_executor_affinities distinct affinities.
  [[nodiscard]] urt::executor executor(const task_spec& spec = {});
  /// The same with home worker `home`, wherever it is called from: its I/O
  /// lives on that worker's reactor while its tasks may run on any worker
  /// spec allows (a busy or preempted home's completions are taken in by
  /// an idle worker: DESIGN.md, "Worker-owned I/O"). Throws
  /// std::invalid_argument when `home` is not a worker spec allows.
  [[nodiscard]] urt::executor executor(const task_spec& spec, unsigned home);
  /// Distinct affinities executors may carry: each is kept for the
  /// runtime's life, so that an executor stays three words.
  static constexpr std::size_t max_executor_affinities = 4096;
  /// Number of workers (fixed for the runtime's life).
  [[nodiscard]] std::size_t worker_count() const noexcept;
  /// The loaded topology and the place of every worker.
  [[nodiscard]] const urt::topology& topology() const noexcept;
  /// A snapshot of the per-worker counters.
  [[nodiscard]] runtime_stats stats() const;

 private:
  struct impl;
  template <class T>
  friend class per_cid;

  // For per_cid: the size of group `g`'s ID space (the worker count);
  // std::invalid_argument, prefixed `what`, for a group of another runtime.
  [[nodiscard]] std::size_t cid_space_size(group g, const char* what) const;
  // For per_cid: the calling task's concurrency ID; std::logic_error,
  // prefixed `what`, unless the caller is a task of group `g` of this runtime.
  [[nodiscard]] unsigned task_cid(group g, const char* what) const;

  friend class urt::executor;
  // How a spawn relates to its caller (Asio's execution::relationship):
  // fork, placed as any spawn; continuation (asio::defer), which the
  // caller runs ahead of, about to return: from a task on a worker its
  // affinity allows, at the task's priority or below, queued on that
  // worker without placement.
  enum class relation : unsigned char { fork, continuation };
  // For executor (urt/executor.hpp), with a spec validated when the
  // executor was made. Spawns `fn`; from outside the runtime's tasks (any
  // other thread, or a worker outside a task: an I/O completion) once
  // stop() has begun, leaves it to its caller to destroy unrun.
  template <class F>
  void executor_spawn(priority_t p, const worker_set* affinity, unsigned group, relation rel,
                      F&& fn) {
    spawn_ticket ticket = begin_executor_spawn(p, affinity, group, rel);
    if (ticket.node_ == nullptr) return;
    ticket.payload()->emplace(std::forward<F>(fn));
    commit_spawn(ticket);
  }
  // Whether execute() with blocking.possibly may run inline: the caller is
  // a task of this runtime at priority `p` in group `group`, on a worker
  // `affinity` allows, and no reactor poll is delivering completions.
  [[nodiscard]] bool executor_may_inline(priority_t p, const worker_set* affinity,
                                         unsigned group) const noexcept;
  // The io_context of worker `w`, and its count of tracked executors.
  [[nodiscard]] asio::io_context& executor_context(unsigned w) const noexcept;
  void executor_work(unsigned w, int delta) const noexcept;
  // A node taken for one spawn: returned to the pool unless committed.
  class spawn_ticket {
   public:
    spawn_ticket(impl* rt, detail::task_node* node, unsigned target, bool local,
                 bool counted_local = false, bool keep = false) noexcept
        : rt_(rt), node_(node), target_(target), local_(local), counted_local_(counted_local),
          keep_(keep) {}
    spawn_ticket(const spawn_ticket&) = delete;
    spawn_ticket& operator=(const spawn_ticket&) = delete;
    ~spawn_ticket();
    [[nodiscard]] detail::task_payload* payload() const noexcept;

   private:
    friend class runtime;
    impl* rt_;
    detail::task_node* node_;
    unsigned target_;
    bool local_;          // placed on the calling worker: submitted to its run queue
    bool counted_local_;  // counted with count_local_accept() (else as remote)
    bool keep_;           // kept on the calling worker, not pushed at once: a continuation,
                          // or a completion taken in at a preempt point
  };

  // `api` names the caller in runtime_stopped's message.
  spawn_ticket begin_spawn(const task_spec& spec, const char* api);
  // What a spawn from outside the runtime's tasks does once stop() has
  // begun: refuse (throw runtime_stopped, naming `api`), or back out (a
  // ticket without a node: the caller's function object is destroyed
  // unrun, as Asio destroys a stopped context's handlers; executors).
  enum class when_stopped : bool { refuse, back_out };
  // begin_spawn() after the spec's checks. `completion`: from a worker
  // outside a task (an I/O completion), counted as a remote spawn.
  spawn_ticket place_spawn(priority_t p, const worker_set* affinity, unsigned group,
                           const char* api, bool completion, relation rel, when_stopped stopped);
  spawn_ticket begin_executor_spawn(priority_t p, const worker_set* affinity, unsigned group,
                                    relation rel);
  void commit_spawn(spawn_ticket& ticket) noexcept;
  void commit_timed(spawn_ticket& ticket, clock::time_point release,
                    std::chrono::nanoseconds period, detail::periodic_state* state) noexcept;
  static void check_deadline(clock::time_point deadline);
  static void check_period(std::chrono::nanoseconds period);
  static void check_start(clock::time_point start);
  static void check_overrun(overrun_policy overrun);

  std::unique_ptr<impl> impl_;
};

}  // namespace urt
