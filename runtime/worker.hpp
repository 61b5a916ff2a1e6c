// worker: one pinned OS thread, its run queue, inbox and doorbell.
//
// Concurrency:
//   - submit_remote(), ring() and hand_token(): any thread, concurrently
//     with everything. The inbox is a wfcqueue: enqueue is wait-free and
//     excludes nothing.
//   - submit_local(): only on the worker's own thread (from inside a task).
//   - the rt_queue (run queue, pushable list, running level): under its
//     lock, taken by the owner for each scheduling step and by other
//     workers for a push or pull (migrator.hpp).
//   - the timer queue, the local splice list and the io_context: owner only.
//   - counters: each has one writer (noted below); anyone may read them.
// Progress: submission is wait-free; the worker blocks only when parked;
// a migration waits for at most two queue locks, each held for a few list
// operations.
#pragma once

#include <urcu/wfcqueue.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "alarm.hpp"
#include "cpupri.hpp"
#include "doorbell.hpp"
#include "idle_window.hpp"
#include "migrator.hpp"
#include "node_pool.hpp"
#include "overload.hpp"
#include "run_queue.hpp"
#include "task_node.hpp"
#include "timer_queue.hpp"
#include "wake_advance.hpp"
#include "urt/runtime.hpp"
#include "urt/stats.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

/// Lifecycle of a runtime as the workers see it. Transitions only forward:
/// running -> draining | cancelling -> stopped.
enum class run_state : std::uint8_t { running, draining, cancelling, stopped };

/// What the runtime shares with all its workers. Read-mostly.
struct runtime_shared {
  /// Written by stop() (seq_cst store, then every doorbell is rung);
  /// workers load it with acquire at each scheduling point.
  std::atomic<run_state> state{run_state::running};
  /// Bumped (and notified) by a worker going idle while the runtime is not
  /// running; stop() waits on it between checks for quiescence.
  std::atomic<std::uint64_t> idle_epoch{0};
  /// Set once by the default exception handler.
  std::atomic<bool> exception_reported{false};

  const topology* topo = nullptr;
  cpupri* prio_map = nullptr;      // a worker's level is set under its queue lock
  overload_mask* overload = nullptr;
  migrator* migrate = nullptr;
  push_token* token = nullptr;
  std::vector<class worker*> peers;  // by id: whom a push or a token hop rings
  migration_mode migration = migration_mode::push_ipi;
  std::chrono::nanoseconds ipi_timeout{0};
  std::chrono::nanoseconds idle_spin{0};
  spin_policy idle_spin_policy = spin_policy::fixed;
  std::chrono::nanoseconds timer_spin{0};
  timer_wake_mode timer_wake = timer_wake_mode::at_release;
  worker_policy policy = worker_policy::other;
  int fifo_priority = 0;
  std::function<void(std::exception_ptr)> on_task_exception;
  const void* owner = nullptr;  // identifies the runtime for worker::current_in()
};

/// Collects worker start-up results for the runtime constructor.
struct startup {
  explicit startup(std::ptrdiff_t workers) : done(workers) {}
  std::latch done;
  std::mutex mutex;
  std::exception_ptr error;  // the first failure
};

class worker {
 public:
  worker(runtime_shared& shared, unsigned id);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  /// Starts the thread; it reports to `st` once set up (or failed).
  void start(startup& st);
  /// Joins the thread (after the state became stopped).
  void join();

  [[nodiscard]] unsigned id() const noexcept { return id_; }
  /// The part other workers move tasks in and out of, under its lock.
  [[nodiscard]] rt_queue& queue() noexcept { return q_; }
  /// Owner only, inside a task: takes in pending work; true when a task more
  /// urgent than the running one is queued here (urt::preempt_point()).
  bool preempt_point() noexcept;

  /// Any thread: queues a node this worker will see at its next scheduling
  /// point, and rings its doorbell if it is parking; true when it rang.
  bool submit_remote(task_node* node) noexcept;
  /// Owner only: one of its tasks rang another worker's doorbell.
  void count_doorbell_sent() noexcept;
  /// Owner only: queues a node directly into the run queue (or, when timed,
  /// into the timer queue).
  void submit_local(task_node* node) noexcept;
  /// Any thread: wakes the worker if it is parking (after a state change
  /// or a task moved in); true when it wrote the doorbell.
  bool ring() noexcept { return bell_.ring(); }
  /// Any thread holding the push token: asks this worker to push at its
  /// next scheduling point and forward the token (hop `seq`); rings it.
  bool hand_token(std::uint64_t seq) noexcept;
  /// Any thread: whether the worker is (about to be) asleep on its doorbell.
  [[nodiscard]] bool parking() const noexcept { return bell_.parking(); }

  /// Accepted-but-unfinished tasks: the placement load. Relaxed and racy by
  /// design; a stale value only makes one placement less balanced. Reads
  /// the finished count from a hint the worker refreshes every
  /// hint_interval tasks and whenever it goes idle, so spawners do not take
  /// a cache miss on a line the worker rewrites after every task.
  [[nodiscard]] std::uint64_t load() const noexcept;
  /// Counts a remote acceptance before the node is enqueued (any thread).
  /// seq_cst: pairs with the seq_cst state store in stop() (see runtime.cpp).
  void count_remote_accept() noexcept { accepted_remote_.fetch_add(1, std::memory_order_seq_cst); }
  void uncount_remote_accept() noexcept { accepted_remote_.fetch_sub(1, std::memory_order_seq_cst); }
  void count_local_accept() noexcept;
  void uncount_local_accept() noexcept;
  /// Tasks finished (completed or cancelled), acquire: pairs with the release
  /// stores after each task, so a caller that sees a task finished also sees
  /// every acceptance that task made.
  [[nodiscard]] std::uint64_t finished_acquire() const noexcept;
  /// Tasks accepted, seq_cst: read after finished_acquire() of every worker.
  [[nodiscard]] std::uint64_t accepted_seq_cst() const noexcept;

  [[nodiscard]] worker_stats stats() const noexcept;

  /// The worker whose thread is calling, if it belongs to the runtime `owner`.
  static worker* current_in(const void* owner) noexcept;

 private:
  void main(startup& st);
  void set_up();
  void loop();
  // One scheduling step under the queue lock: take in new work, pick the
  // next task, publish; then the migration the step calls for. Returns the
  // task to run, or nullptr.
  task_node* step(run_state seen) noexcept;
  void close() noexcept;
  // Under the queue lock: inbox and due timers into the run queue.
  std::size_t drain_inbox() noexcept;
  void release_due() noexcept;
  void enqueue(task_node* node) noexcept;
  void cancel_queued() noexcept;
  void end_periodic_series() noexcept;
  // Lock-free: whether a step would find something new (inbox, a task
  // moved in, a token hop).
  [[nodiscard]] bool work_pending() const noexcept;
  // Migration (no lock held): push while it makes progress; the push_ipi
  // request after lowering; serving a token hop; the stuck-token fallback.
  // `top_changes`: q_.top_changes when the caller saw the queue; a failed
  // push records it, and push_due() skips pushes until it moves.
  void push_tasks(std::uint64_t top_changes) noexcept;
  // Under the queue lock: when overloaded and a push could succeed where
  // the last one failed, the q_.top_changes to hand to push_tasks().
  [[nodiscard]] std::optional<std::uint64_t> push_due() const noexcept;
  // After lowering with overloaded workers about: pull (pull mode) or ask
  // for a push (push_ipi); in step(), about to commit to a task, also wait
  // for the push up to ipi_timeout, then pull (the stuck-worker fallback).
  enum class wait_for_push : bool { no, yes };
  void migrate_on_lowering(wait_for_push wait) noexcept;
  // The fence of the lowering Dekker pair, then whether any worker is
  // overloaded.
  [[nodiscard]] bool overload_seen_after_lowering() const noexcept;
  void serve_token() noexcept;
  // Takes over a token hop pending past ipi_timeout and sends it on;
  // returns the worker that kept it, or none.
  unsigned take_over_stuck_token() noexcept;
  // One pull from `source` (the fallback), counted; true when it moved a task.
  bool pull_one(unsigned source) noexcept;
  void send_hop(push_token::hop h) noexcept;
  void ring_peer(unsigned target) noexcept;
  void run_task(task_node* node) noexcept;
  void discard(task_node* node, std::atomic<std::uint64_t>& counter) noexcept;
  void idle(run_state seen);
  // How long to spin when going idle now (idle_spin_policy).
  [[nodiscard]] std::chrono::nanoseconds idle_spin() const noexcept;
  // Whether the adaptive advance is in use (and learns).
  [[nodiscard]] bool learning_advance() const noexcept;
  // How long before its release the next timed release wakes a parked worker.
  [[nodiscard]] std::chrono::nanoseconds timer_lead() const noexcept;
  // Spins from `woke` to the release `due`, when the worker woke for it
  // early (at `wake` = due - timer_lead() or later), unless work shows up.
  void spin_to(clock::time_point due, clock::time_point wake, clock::time_point woke) noexcept;
  void handle_exception(const std::exception_ptr& error) noexcept;
  static void bump(std::atomic<std::uint64_t>& counter) noexcept;
  void publish_load_hint() noexcept;

  static constexpr std::uint64_t hint_interval = 32;

  runtime_shared& shared_;
  const unsigned id_;
  std::thread thread_;

  // Guarded by its own lock.
  rt_queue q_;

  // Owner-only state.
  // Only this worker's thread runs it and waits on its fds (ringers write
  // the eventfd directly; the fds are registered before the thread
  // starts), so Asio may skip its per-descriptor locking on the wake path.
  asio::io_context io_{ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  doorbell bell_{io_};
  alarm alarm_{io_};
  timer_queue timers_;
  wake_advance advance_;  // timer_wake::adaptive: learned from parked wake-ups
  idle_window window_{shared_.idle_spin};  // spin_policy::adaptive: the idle spin now
  bool series_ended_ = false;  // periodic series ended once stop() began
  unsigned rotation_ = 0;  // spreads this worker's pushes over equal targets
  std::uint64_t push_failed_at_ = ~std::uint64_t{0};  // q_.top_changes at the last failed push
  __cds_wfcq_head splice_head_{};
  cds_wfcq_tail splice_tail_{};

  // Counters written by the owner only (plain load + store).
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> exceptions_{0};
  std::atomic<std::uint64_t> parks_{0};
  std::atomic<std::uint64_t> doorbells_sent_{0};
  std::atomic<std::uint64_t> pushes_{0};
  std::atomic<std::uint64_t> pulls_{0};
  std::atomic<std::uint64_t> token_hops_{0};  // hops this worker sent
  std::atomic<std::uint64_t> fallbacks_{0};   // stuck hops it took over
  std::atomic<std::uint64_t> timer_spin_ns_{0};  // spun waiting for releases
  std::atomic<std::int64_t> advance_ns_{0};      // advance_.value(), for stats()
  std::atomic<std::int64_t> window_ns_{shared_.idle_spin.count()};  // window_.value(), for stats()

  // Owner-written, read by spawners: refreshed rarely, on a line of its own.
  alignas(64) std::atomic<std::uint64_t> finished_hint_{0};
  std::atomic<std::uint64_t> accepted_local_{0};  // changes only with local spawns

  // Written by spawners on other threads: a line of their own.
  alignas(64) std::atomic<std::uint64_t> accepted_remote_{0};
  // The token hop this worker is asked to serve (0: none); written by the
  // worker that sends the hop, exchanged by the owner.
  alignas(64) std::atomic<std::uint64_t> token_seq_{0};

  // The inbox: producers touch the tail, the owner the head.
  alignas(64) cds_wfcq_tail inbox_tail_{};
  alignas(64) __cds_wfcq_head inbox_head_{};
};

}  // namespace urt::detail
