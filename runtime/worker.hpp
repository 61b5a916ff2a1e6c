// worker: one pinned OS thread, its run queue, inbox and timer queue, and
// the loop that runs its tasks. The loop's scheduling step takes in new
// work, picks the most urgent task and publishes the worker's level; the
// policies around it are modules of their own that the step calls:
//   - balancer (balancer.hpp): migration: pushes, pulls, the push token;
//   - parker (parker.hpp): idling: spin, park on the doorbell, the alarm;
//   - bandwidth (bandwidth.hpp): the FIFO budget, consulted before a pick;
//   - cid (cid.hpp): the concurrency ID the worker holds for the group it
//     runs, given up or kept at each task switch (after the pick);
//   - io_poller (io_poller.hpp): worker-owned I/O: when the worker polls
//     its reactor at a scheduling point (before the step, in
//     preempt_point(), while spinning idle);
//   - stranded (stranded.hpp): an idle worker's watch over workers that
//     reach no scheduling point with remote spawns in their inbox;
//   - resched (resched.hpp): an urgent remote spawn queued behind a
//     running task, served by the first worker to step below it;
//   - the next mechanisms plug in the same way: a module with its own
//     state, called from step() at the marked hooks (before a task is
//     picked, after the pick, after it ran), never new members here.
//
// Concurrency:
//   - submit_remote(), ring() and hand_token(): any thread, concurrently
//     with everything. The inbox's push is one lock-free CAS and excludes
//     nothing.
//   - submit_local(): only on the worker's own thread (from inside a task).
//   - take_in_for_peer(): another worker's thread, under this worker's
//     queue lock (which every taker of the inbox holds: inbox.hpp).
//   - the rt_queue (run queue, pushable list, running level): under its
//     lock, taken by the owner for each scheduling step and by other
//     workers for a push or pull (migrator.hpp).
//   - the timer queue, the local splice list and the io_context: owner only.
//   - counters (worker_counters.hpp): each has one writer; anyone may read.
// Progress: submission is lock-free (inbox.hpp); the worker blocks only when parked;
// a migration waits for at most two queue locks, each held for a few list
// operations.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>

#include "balancer.hpp"
#include "bandwidth.hpp"
#include "cid.hpp"
#include "group_budgets.hpp"
#include "inbox.hpp"
#include "io_poller.hpp"
#include "parker.hpp"
#include "quick_pick.hpp"
#include "resched.hpp"
#include "rt_queue.hpp"
#include "runtime_shared.hpp"
#include "stranded.hpp"
#include "task_node.hpp"
#include "timer_queue.hpp"
#include "urt/stats.hpp"
#include "worker_counters.hpp"

namespace urt::detail {

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
  /// `off_cpu`: the caller runs on this worker's CPU (binding pu), so the
  /// worker is not running now, whatever its doorbell says.
  bool submit_remote(task_node* node, bool off_cpu = false) noexcept;
  /// Another worker, when this one has reached no scheduling point for
  /// ipi_timeout with remote spawns in its inbox (stranded.hpp): under this
  /// worker's queue lock, moves the inbox's untimed nodes into its run
  /// queue, where pulls and pushes see them, and publishes its level.
  /// Returns how many it moved (0 once stop() began).
  std::size_t take_in_for_peer(int above) noexcept;
  /// Owner only: one of its tasks rang another worker's doorbell.
  void count_doorbell_sent() noexcept { worker_counters::bump_relaxed(counters_.doorbells_sent); }
  /// Any thread: an outside spawner yielded its CPU to this worker.
  void count_wake_yield() noexcept {
    counters_.wake_yields.fetch_add(1, std::memory_order_relaxed);
  }
  /// What a local spawn does about the task running on: `push` moves the new
  /// task (or a more urgent queued one) to a lower worker at once, since the
  /// running task goes on; `keep` leaves it here for when the running task
  /// returns, which its caller says is about to happen (a continuation).
  enum class local_spawn : unsigned char { push, keep };
  /// Owner only: queues a node directly into the run queue (or, when timed,
  /// into the timer queue).
  void submit_local(task_node* node, local_spawn how) noexcept;
  /// Any thread: wakes the worker if it is parking (after a state change
  /// or a task moved in); true when it wrote the doorbell.
  bool ring() noexcept { return parker_.ring(); }
  /// Any thread holding the push token: asks this worker to push at its
  /// next scheduling point and forward the token (hop `seq`); rings it.
  bool hand_token(std::uint64_t seq) noexcept {
    balancer_.accept_hop(seq);
    return parker_.ring();
  }
  /// Any thread: whether the worker is (about to be) asleep on its doorbell.
  [[nodiscard]] bool parking() const noexcept { return parker_.parking(); }
  /// Any thread: parked and not rung yet (a hint, see doorbell.hpp).
  [[nodiscard]] bool asleep() const noexcept { return parker_.asleep(); }

  /// Accepted-but-unfinished tasks: the placement load. Relaxed and racy by
  /// design; a stale value only makes one placement less balanced. Reads
  /// the finished count from a hint the worker refreshes every
  /// hint_interval tasks and whenever it goes idle, so spawners do not take
  /// a cache miss on a line the worker rewrites after every task.
  [[nodiscard]] std::uint64_t load() const noexcept;
  /// Counts a remote acceptance before the node is enqueued (any thread).
  /// seq_cst: pairs with the seq_cst state store in stop() (runtime.cpp, shut_down).
  void count_remote_accept() noexcept {
    counters_.accepted_remote.fetch_add(1, std::memory_order_seq_cst);
  }
  void uncount_remote_accept() noexcept {
    counters_.accepted_remote.fetch_sub(1, std::memory_order_seq_cst);
  }
  void count_local_accept() noexcept { worker_counters::bump_release(counters_.accepted_local); }
  void uncount_local_accept() noexcept;
  /// Tasks finished (completed or cancelled), acquire: pairs with the release
  /// stores after each task, so a caller that sees a task finished also sees
  /// every acceptance that task made.
  [[nodiscard]] std::uint64_t finished_acquire() const noexcept;
  /// Tasks accepted, seq_cst: read after finished_acquire() of every worker.
  [[nodiscard]] std::uint64_t accepted_seq_cst() const noexcept;

  [[nodiscard]] worker_stats stats() const noexcept;
  /// Any thread: adds this worker's counters of group `g` to `out`.
  void add_group_stats(unsigned g, group_stats& out) const noexcept;

  /// Owner only, inside a task of group `g`: its concurrency ID (cid.hpp).
  [[nodiscard]] unsigned cid(unsigned g) noexcept { return cids_.get(g); }

  /// The io_context of this worker's executors (urt/executor.hpp). Its
  /// sockets and timers may be used from any thread; the worker runs it,
  /// and so does an idle worker when this one has not looked into it for
  /// too long (io_rescue.hpp).
  [[nodiscard]] asio::io_context& io() noexcept { return io_; }
  /// After join(), on the thread stopping the runtime: shuts the io_context's
  /// services down, destroying the handlers still pending (a coroutine
  /// suspended on a timer or a socket) while the runtime is whole.
  void shut_down_io() noexcept { io_.shutdown(); }
  /// Any thread: what an idle worker's io_watch sees of this one.
  [[nodiscard]] io_peers::state io_state() const noexcept {
    return {.candidate = io_poll_.outstanding() > 0 && !parker_.parking(),
            .last_look = io_poll_.last_look()};
  }
  /// Another worker, idle: polls this worker's reactor for it unless this
  /// one is parked in it (io_poller::rescue); the completions taken in.
  std::size_t rescue_io() { return io_poll_.rescue(); }
  /// Any thread: a tracked executor of this worker was made (+1) or
  /// destroyed (-1) (io_poller.hpp). When the count leaves 0 the worker is
  /// rung: parked on its doorbell's futex, it would see no completion, so
  /// it parks again in its reactor.
  void count_io_work(int delta) noexcept;

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
  // step()'s first try after a task: the run queue's head at the level that
  // ran, when quick_pick::allows() it; nullptr when a full step must run.
  task_node* quick_step() noexcept;
  // What the budgets allow the next pick to take.
  struct pick_rule {
    bandwidth::allow allow = bandwidth::allow::any;
    bool groups_held = false;    // some group's FIFO tasks are held here
    bool budget_looked = false;  // the runtime-wide budget looked (picked() follows)
  };
  // Under the queue lock, in step(): takes up new parameters, charges the
  // budgets and decides their holds (only where they can change the pick).
  /// `stopping`: stop() has begun; budgets then hold nothing back, so that
  /// a drain runs what is held now instead of waiting out periods.
  pick_rule consult_budgets(bool stopping) noexcept;
  // Under the queue lock: whether a budget looks at the next pick (the run
  // queue's top); consult_budgets() and quick_step() ask the same.
  [[nodiscard]] bool budgets_look() const noexcept;
  // Under the queue lock: the most urgent task the rule allows, unlinked.
  task_node* pick(const pick_rule& rule) noexcept;
  void close() noexcept;
  // Under the queue lock: a scheduling point's take of the inbox into the
  // run queue and the timer queue; `horizon` is release_horizon()'s.
  std::size_t drain_inbox(clock::time_point horizon) noexcept;
  // Under the queue lock: all of the inbox, the nodes that wait for a
  // deadline into the timer queue before any other node is queued.
  // `horizon`: read before the take, as release_horizon().
  std::size_t drain_all(clock::time_point horizon) noexcept;
  // Under the queue lock, which it releases and retakes when it acts: claims
  // a request above `level` (resched.hpp), takes that worker's inbox nodes
  // above `level` in for it and pulls its most urgent task here.
  void serve_resched(int level) noexcept;
  // Under the queue lock: the level below which this worker claims other
  // workers' requests: what it runs or has queued, and what its inbox
  // holds. A take stops at a level whose chain it has not reversed whole
  // (inbox::reverse nodes a take), so after a burst of 1,000 the run queue
  // stayed empty for a few steps; counted idle, the worker claimed a
  // request at the burst's own level for a peer and took that peer's
  // burst in (500 nodes, 13 us), while an urgent task waited in its inbox
  // (bench/README.md, "urt-peers (d): a worker walking its own burst").
  [[nodiscard]] int claim_floor() const noexcept {
    const int now = q_.current();
    return now == cpupri::level_invalid ? now : std::max(now, inbox_.top());
  }
  // Under the queue lock, before drain_inbox(): the time up to which this
  // step's release_due() releases. Read before the inbox is taken, so that
  // every timed spawn that returned before a release it is due with is in
  // the timer queue by then, and releases due together queue in deadline
  // order (a clock read after the take would let a release overtake a node
  // pushed between the two). time_point::min() when no timed node is in
  // the timer queue or on its way (no clock read): a node taken in this
  // step is then released at the next.
  [[nodiscard]] clock::time_point release_horizon() const noexcept;
  // Under the queue lock: the timed releases due by `horizon` into the run
  // queue, in release order (ties: the order they reached the timer queue).
  void release_due(clock::time_point horizon) noexcept;
  // Under the queue lock: a due timed node into the run queue, or the end
  // of a series cancelled meanwhile.
  void release(task_node* node) noexcept;
  // Under the queue lock: a node taken in (inbox, local spawn) into the run
  // queue, or, timed and not due yet, into the timer queue. `due_by`: the
  // latest release a spawn_at() past at its call may release ahead of
  // itself (see its body).
  void enqueue(task_node* node, clock::time_point due_by) noexcept;
  void cancel_queued() noexcept;
  void end_periodic_series() noexcept;
  // Lock-free: whether a step would find something new (inbox, a task
  // moved in, a token hop).
  [[nodiscard]] bool work_pending() const noexcept;
  void run_task(task_node* node) noexcept;
  // After a periodic release ran: its next release into the timer queue, or
  // the series ends (stop() began or it was cancelled).
  void rearm_series(task_node* node, periodic_state& series) noexcept;
  void discard(task_node* node, std::atomic<std::uint64_t>& counter) noexcept;
  // Under the queue lock: discards `node` once the lock is released (the
  // callable's destructor is user code and may spawn, which takes this very
  // lock). `cancelled`: counted as cancelled, else as completed.
  void discard_unlocked(task_node* node, bool cancelled) noexcept;
  // No lock held: the discards discard_unlocked() put off; true when it
  // discarded any (their destructors may have queued work here).
  bool discard_put_off() noexcept;
  void idle(run_state seen);
  // Owner, at a scheduling point outside the queue lock: the reactor poll
  // io_poller decides on, and the busy worker's look at its peers
  // (io_watch::while_busy); an exception from a completion (a spawn that
  // could not allocate) goes to the task exception handler. Returns the
  // completions it ran (a failed one counts). Inline: with no I/O
  // outstanding (the common case) it is one relaxed load at every step.
  std::size_t poll_io() noexcept {
    return io_poll_.outstanding() > 0 ? poll_io_now() : 0;
  }
  std::size_t poll_io_now() noexcept;
  // Owner, idle or at a reactor poll of its own: polls worker w's reactor
  // for it (io_rescue.hpp) and counts what it took in (io_rescued); an
  // exception from a completion goes to the task exception handler.
  // Returns the completions it ran (a failed one counts).
  std::size_t rescue_peer_io(unsigned w) noexcept;
  void handle_exception(const std::exception_ptr& error) noexcept;
  void publish_load_hint() noexcept;

  static constexpr std::uint64_t hint_interval = 32;

  runtime_shared& shared_;
  const unsigned id_;
  std::thread thread_;

  // Guarded by its own lock.
  rt_queue q_;

  worker_counters counters_;

  // An io_context whose services stop() shuts down once every worker has
  // exited (shut_down_io()): see runtime::impl::shut_down(). Shutting down
  // twice (again in ~io_context) is what Asio's own destructors do.
  class io_context_t : public asio::io_context {
   public:
    using asio::io_context::io_context;
    using asio::execution_context::shutdown;
  };

  // Owner-only state.
  // Declared before io_, so that it outlives it: an operation still pending
  // when the worker goes is destroyed at its shutdown, and its tracked
  // executor then counts itself out here (work_finished). It only keeps a
  // reference to io_ until then.
  io_poller io_poll_;
  // Run by this worker's thread and, while it is stuck, by idle workers
  // rescuing it, through its lease (io_rescue.hpp); hint 1 (mostly one
  // thread). Asio's locking stays on:
  // sockets and timers made with this worker's executors may be created,
  // started and closed from any thread (urt/executor.hpp).
  io_context_t io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  parker parker_;
  balancer balancer_;
  quick_pick quick_;
  bandwidth bandwidth_;
  group_budgets groups_;
  cid_user cids_;
  stranded_watch strand_watch_;
  io_watch io_watch_;
  std::uint64_t bandwidth_version_ = 0;  // the parameter block bandwidth_ follows
  timer_queue timers_;
  // The last drain's horizon (under the queue lock): every timed spawn that
  // returned before it is in the timer queue or the run queue (drain_all(),
  // drain_inbox()). What a spawn_at() past at its call, taken in between
  // drains, may release ahead of itself.
  clock::time_point horizon_ = clock::time_point::min();
  bool series_ended_ = false;  // periodic series ended once stop() began
  // Nodes to discard after the queue lock is released, linked through
  // their (unused) run-queue hooks: cancelled ones and completed ones.
  task_node* put_off_cancelled_ = nullptr;
  task_node* put_off_completed_ = nullptr;
  bool look_again_ = false;  // a step discarded tasks after its pick: step again before idling
  // The level the last step served reschedule requests above (priority_max:
  // none); an idle wait ends on a request above it (idle()).
  int claim_level_ = priority_max;

  inbox inbox_;  // remote submissions (inbox.hpp)
};

}  // namespace urt::detail
