// urt-peers: urt against asio::thread_pool and oneTBB on three workloads, all
// measured in one run, ratios printed (DESIGN.md, "How results are measured":
// a lone absolute time on these 2-core machines means little).
//
//   (a) throughput     one external thread spawns 65536 empty counting tasks
//                      onto 2 workers and waits until all ran; tasks/s,
//                      median of 5 runs.
//   (b) idle wake      the pool is left idle for 2 ms (urt's workers park
//                      after idle_spin = 50 us; asio's threads block on their
//                      condition variable at once; oneTBB's go back to its
//                      thread pool and sleep), then t0 = steady_clock::now(),
//                      one task is posted and records t1 on entry; t1 - t0
//                      over 2000 samples, p50 and p99; and the CPU time
//                      each pool's two threads used over the phase, per
//                      sample (what its idling and waking cost). One sample
//                      of each pool per round, in a shuffled order (below).
//   (c) urgent behind  10,000 tasks that each spin 1 us are queued at low
//       10k            priority, then one urgent task is posted; the time from
//                      its post to its start, 20 samples, p50 and max.
//   (d) plain burst    as a user writes it: from the SCHED_OTHER main thread,
//                      with the pools running, no gate and no settling, 100,
//                      1,000 or 10,000 1-us tasks at low priority, then at
//                      once one urgent task; its start latency, 100 samples
//                      per size, p50 / p90 / max (asio only at 100: it has
//                      no priorities, its urgent task waits for the burst).
//   (e) mixed          a feeder thread keeps 8 tasks of 50 us at low
//                      priority in flight (it posts one whenever one ends),
//                      and another thread posts one urgent task every
//                      200 us: the urgent tasks' start latency, 1000 per
//                      executor, p50 / p99 / max; and the low tasks finished
//                      per second meanwhile (what the pool gave the bulk work).
//                      urt runs it once more with the feeder paced to the
//                      bulk rate oneTBB reached: a pool that runs less bulk
//                      work has idle workers for the urgent task more often,
//                      so latencies compare fairly at equal bulk throughput.
//   (f) shared counter 1,000,000 empty lambdas that each bump one shared
//                      counter, posted from the main thread with the pools
//                      simply running (no holding, no warm-up), until all
//                      ran; M tasks/s, median of 5.
//   (g) busy wake      (b) as a thread that goes on with its own work writes
//                      it: after the post the main thread does not block but
//                      keeps its CPU (it spins until the task has started);
//                      1000 samples, p50 / p99 / max, in shuffled rounds
//                      as (b). A worker woken on the
//                      poster's CPU runs only when the OS takes that CPU from
//                      the poster.
//
// The executors, each with two threads running tasks:
//   urt     urt::runtime on cpus "0-1" (two pinned workers), idle_spin 50 us.
//           (a) priority 10, (b) priority 90, (c) low tasks priority 1 with
//           no affinity (urt's own placement spreads them), urgent 99.
//   asio    asio::thread_pool(2) and asio::post. It has no priorities: the
//           urgent task of (c) queues behind the whole backlog.
//   oneTBB  tbb::task_arena::enqueue, oneTBB's fire-and-forget path (a
//           task_group would need a wait() to reclaim it). Arenas are built
//           with max_concurrency 2 and *no* slot reserved for external
//           threads, task_arena(2, 0, priority): the spawning thread never
//           joins an arena, so the default of one reserved slot would leave
//           a single worker. oneTBB's global pool has hardware_concurrency - 1
//           workers (1 here, the main thread being expected to take part), so
//           a tbb::global_control raises max_allowed_parallelism to 3 (the
//           main thread + 2 workers). (a) and (b) use a normal-priority arena;
//           (c) queues the backlog in a priority::low arena and the urgent
//           task in a separate priority::high arena.
//
// In (a) and (c) the workers are first held by one blocker task each, and the
// harness checks that both blockers run at once: that is what shows every
// executor really has two threads running its tasks. (a) first queues two
// untimed batches behind the blockers (the first grows node pools and caches
// to the batch's high-water mark; the second times the posting side alone)
// and one plain batch before the timed runs. In (c) the backlog is queued
// while the workers are held, so all 10,000 low tasks are queued before the
// gate opens; the main thread then blocks until both threads are running low
// tasks and 64 have finished (so each worker has been through a scheduling
// point since the backlog arrived), posts the urgent task, and blocks until
// everything (blockers, backlog, urgent task) has finished. During (c) only,
// the main thread runs at SCHED_FIFO 10: on these 2 cores a SCHED_OTHER main
// thread, having used far more CPU than the held workers, would wait for a
// CPU for milliseconds once woken while the backlog drained meanwhile. It
// only ever wakes to post; it never spins while a worker could need its CPU.
// Waits are bare futex waits, which block at once (std::atomic::wait spins
// and yields first).
//
// The three executors live for the whole run and take turns (round by round,
// sample by sample), so drift in the machine's load hits all of them alike;
// a 10 ms pause (2 ms before each wake sample) lets the previous executor's
// threads go idle first. The main thread is not pinned; urt's workers are
// pinned to CPUs 0 and 1, the peers' threads are not.

// Asio first, before any libstdc++ header: <asio/detail/config.hpp> decides
// from _GLIBCXX_HAVE_ALIGNED_ALLOC whether asio::aligned_new uses
// std::aligned_alloc or ::operator new, and urt's own translation units
// include Asio first. Keeping the same order keeps one definition of that
// inline function in the program (see bench/spawn_bench.cpp).
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>

#include <dirent.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>
#include <random>
#include <semaphore>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/runtime.hpp"
#include "urt/stats.hpp"
#include "urt/task.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr std::uint32_t throughput_tasks = 65536;
constexpr int throughput_runs = 5;
constexpr int wake_samples = 2000;
constexpr int busy_wake_samples = 1000;
constexpr milliseconds wake_idle{2};
// (b) and (g) take one sample of each pool per round, in an order shuffled
// every round (a fixed seed: runs are comparable). A wake-up after 2 ms idle
// runs on caches that the previous sample left: in a fixed order each pool
// always follows the same neighbour: sampled twice per round in a fixed
// order (urt, urt, asio), one urt pool's second samples had a p50 6% and 22%
// lower than its first in two runs of 700 rounds.
constexpr std::mt19937::result_type order_seed = 20261206;

/// Calls f(0), f(1) and f(2) (urt, asio, oneTBB) in an order drawn from rng.
template <class F>
void in_shuffled_order(std::mt19937& rng, F&& f) {
  int order[] = {0, 1, 2};
  std::shuffle(std::begin(order), std::end(order), rng);
  for (const int pool : order) f(pool);
}
constexpr std::uint32_t backlog_tasks = 10000;
constexpr nanoseconds backlog_task_spin = microseconds{1};
constexpr int backlog_samples = 20;
constexpr int burst_samples = 100;
constexpr std::uint32_t backlog_settle_tasks = 64;
constexpr int main_fifo_priority = 10;  // the main thread's, during (c) only
constexpr milliseconds switch_pause{10};
constexpr unsigned threads_per_executor = 2;

constexpr int throughput_priority = 10;
constexpr int wake_priority = 90;
constexpr int low_priority = 1;
constexpr int urgent_priority = urt::priority_max;

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<nanoseconds>(clock_type::now().time_since_epoch()).count();
}

void spin_for(nanoseconds d) noexcept {
  const auto end = clock_type::now() + d;
  while (clock_type::now() < end) {
  }
}

// The main thread waits with a bare futex: it blocks at once, where
// std::atomic::wait first spins and yields for a while, holding a CPU that
// one of only two workers may need. The setter always issues the wake.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

/// Blocks until `flag` is non-zero.
void wait_set(std::atomic<std::uint32_t>& flag) noexcept {
  while (flag.load(std::memory_order_acquire) == 0) {
    syscall(SYS_futex, static_cast<void*>(&flag), FUTEX_WAIT_PRIVATE, 0u, nullptr, nullptr, 0);
  }
}

void raise(std::atomic<std::uint32_t>& flag) noexcept {
  flag.store(1, std::memory_order_release);
  syscall(SYS_futex, static_cast<void*>(&flag), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

/// Runs the calling thread at SCHED_FIFO `priority` (0: back to SCHED_OTHER).
/// Returns false when the OS refuses.
bool set_main_fifo(int priority) noexcept {
  sched_param param{};
  param.sched_priority = priority;
  return pthread_setschedparam(pthread_self(), priority > 0 ? SCHED_FIFO : SCHED_OTHER, &param) ==
         0;
}

// Shared state of the workloads. Global: it outlives every executor, so a
// late store or notify from a worker is harmless.

/// (a): every task bumps `ran`; the one that completes the batch raises `done`.
struct batch_state {
  alignas(64) std::atomic<std::uint32_t> ran{0};
  alignas(64) std::atomic<std::uint32_t> done{0};
  std::uint32_t size = 0;  // written before the batch's spawns publish it

  void reset(std::uint32_t n) noexcept {
    size = n;
    ran.store(0, std::memory_order_relaxed);
    done.store(0, std::memory_order_relaxed);
  }
  void hit() noexcept {
    if (ran.fetch_add(1, std::memory_order_acq_rel) + 1 == size) raise(done);
  }
} g_batch;

/// Holds every worker of an executor inside one blocker task each.
struct gate_state {
  alignas(64) std::atomic<std::uint32_t> closed{0};
  alignas(64) std::atomic<unsigned> holding{0};
  alignas(64) std::atomic<unsigned> released{0};

  void close() noexcept {
    holding.store(0, std::memory_order_relaxed);
    released.store(0, std::memory_order_relaxed);
    closed.store(1, std::memory_order_release);
  }
  /// The blocker's body. It blocks on a futex rather than spinning or
  /// yielding: the main thread needs a CPU meanwhile, and under EEVDF every
  /// sched_yield pushes the caller's deadline a slice further, so a thread
  /// that yielded for milliseconds would then wait milliseconds for its CPU
  /// behind any other runnable thread there.
  void hold() noexcept {
    holding.fetch_add(1, std::memory_order_acq_rel);
    while (closed.load(std::memory_order_acquire) != 0) {
      syscall(SYS_futex, static_cast<void*>(&closed), FUTEX_WAIT_PRIVATE, 1u, nullptr, nullptr, 0);
    }
    released.fetch_add(1, std::memory_order_acq_rel);
  }
  /// True once `n` blockers run at the same time (false after 2 s).
  [[nodiscard]] bool all_holding(unsigned n) const noexcept {
    const auto deadline = clock_type::now() + std::chrono::seconds{2};
    while (holding.load(std::memory_order_acquire) < n) {
      if (clock_type::now() >= deadline) return false;
      std::this_thread::sleep_for(microseconds{20});
    }
    return true;
  }
  void open() noexcept {
    closed.store(0, std::memory_order_release);
    syscall(SYS_futex, static_cast<void*>(&closed), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr,
            0);
  }
  void wait_released(unsigned n) const noexcept {
    while (released.load(std::memory_order_acquire) < n) std::this_thread::yield();
  }
} g_gate;

/// (b): the posted task's entry time and the CPU it ran on.
struct wake_state {
  alignas(64) std::atomic<std::int64_t> t1{0};
  std::atomic<int> cpu{-1};
  std::atomic<std::uint32_t> done{0};
} g_wake;

/// (c): the backlog's progress and the urgent task's entry.
struct backlog_state {
  alignas(64) std::atomic<std::uint32_t> low_done{0};
  alignas(64) std::atomic<unsigned> threads_running{0};  // distinct threads that ran a low task
  std::atomic<std::uint32_t> sample{0};                   // the sample's number
  alignas(64) std::atomic<std::uint32_t> settled{0};
  std::atomic<std::uint32_t> all_low_done{0};
  alignas(64) std::atomic<std::int64_t> t1{0};
  std::atomic<std::uint32_t> low_done_at_start{0};
  std::atomic<std::uint32_t> urgent_done{0};

  void reset() noexcept {
    sample.fetch_add(1, std::memory_order_relaxed);
    low_done.store(0, std::memory_order_relaxed);
    threads_running.store(0, std::memory_order_relaxed);
    settled.store(0, std::memory_order_relaxed);
    all_low_done.store(0, std::memory_order_relaxed);
    urgent_done.store(0, std::memory_order_relaxed);
  }
  void low() noexcept {
    thread_local std::uint32_t seen_sample = 0;
    const std::uint32_t current = sample.load(std::memory_order_relaxed);
    if (seen_sample != current) {
      seen_sample = current;
      threads_running.fetch_add(1, std::memory_order_relaxed);
    }
    spin_for(backlog_task_spin);
    const std::uint32_t done = low_done.fetch_add(1, std::memory_order_acq_rel) + 1;
    // Settled: every thread is running low tasks (so each has been through
    // a scheduling point since the backlog was queued) and a few have run.
    if (done >= backlog_settle_tasks && settled.load(std::memory_order_relaxed) == 0 &&
        threads_running.load(std::memory_order_relaxed) >= threads_per_executor &&
        settled.exchange(1, std::memory_order_acq_rel) == 0) {
      raise(settled);
    }
    if (done == backlog_tasks) {
      // One thread ran the whole backlog (oneTBB's second thread can stay
      // asleep): never leave the main thread waiting for a settling that
      // cannot come. The sample then shows 0 low tasks left at the post.
      // acq_rel: the same exchange as the settling path above, so only one raises.
      if (settled.exchange(1, std::memory_order_acq_rel) == 0) raise(settled);
      raise(all_low_done);
    }
  }
  void urgent() noexcept {
    t1.store(now_ns(), std::memory_order_relaxed);
    low_done_at_start.store(low_done.load(std::memory_order_relaxed), std::memory_order_relaxed);
    raise(urgent_done);
  }
} g_backlog;

/// (d): a plain burst's progress and the urgent task's entry.
struct burst_state {
  alignas(64) std::atomic<std::uint32_t> low_done{0};
  std::uint32_t size = 0;
  alignas(64) std::atomic<std::int64_t> t1{0};
  std::atomic<std::uint32_t> all_low_done{0};
  std::atomic<std::uint32_t> urgent_done{0};

  void reset(std::uint32_t n) noexcept {
    size = n;
    low_done.store(0, std::memory_order_relaxed);
    all_low_done.store(0, std::memory_order_relaxed);
    urgent_done.store(0, std::memory_order_relaxed);
  }
  void low() noexcept {
    spin_for(backlog_task_spin);
    // acq_rel: the task that completes the count has seen every other
    // task's work; raise()'s release pairs with wait_set()'s acquire.
    if (low_done.fetch_add(1, std::memory_order_acq_rel) + 1 == size) raise(all_low_done);
  }
  void urgent() noexcept {
    t1.store(now_ns(), std::memory_order_relaxed);
    raise(urgent_done);
  }
} g_burst;

/// (e): the urgent tasks' start latencies and the feeder's budget.
struct mixed_state {
  static constexpr int in_flight = 8;
  static constexpr int samples = 1000;
  std::counting_semaphore<in_flight> slots{in_flight};  // low tasks that may be posted
  std::atomic<bool> feeding{false};
  std::vector<std::int64_t> posted_ns = std::vector<std::int64_t>(samples);
  std::vector<std::atomic<std::int64_t>> started_ns = std::vector<std::atomic<std::int64_t>>(samples);
  std::atomic<int> urgent_done{0};
  std::atomic<std::uint64_t> low_done{0};  // low tasks finished
} g_mixed;

/// (e) on one executor: the urgent tasks' start latencies, us, and the low
/// tasks' throughput while they were posted (what the workers gave the
/// bulk work), per second.
struct mixed_result {
  std::vector<double> us;
  double low_per_s = 0;
};

// ---------------------------------------------------------------------------
// The executors. Each offers: post (a), post_wake (b), hold (blocker `i` of
// the throughput/wake pool), hold_low (blocker `i` where the backlog runs),
// post_low and post_urgent (c).

class urt_executor {
 public:
  static constexpr const char* name = "urt";

  urt_executor() : rt_(make_options()) {}
  ~urt_executor() { rt_.stop(); }
  urt_executor(const urt_executor&) = delete;
  urt_executor& operator=(const urt_executor&) = delete;

  template <class F>
  void post(F&& f) {
    rt_.spawn(urt::task_spec{.priority = throughput_priority}, std::forward<F>(f));
  }
  template <class F>
  void post_wake(F&& f) {
    rt_.spawn(urt::task_spec{.priority = wake_priority}, std::forward<F>(f));
  }
  template <class F>
  void post_at(int priority, F&& f) {
    rt_.spawn(urt::task_spec{.priority = priority}, std::forward<F>(f));
  }
  // urt does not steal work: a blocker per worker needs an affinity.
  template <class F>
  void hold(unsigned i, F&& f) {
    rt_.spawn(urt::task_spec{.priority = urt::priority_max, .affinity = urt::worker_set{i}},
              std::forward<F>(f));
  }
  template <class F>
  void hold_low(unsigned i, F&& f) {
    rt_.spawn(urt::task_spec{.priority = low_priority, .affinity = urt::worker_set{i}},
              std::forward<F>(f));
  }
  template <class F>
  void post_low(F&& f) {
    rt_.spawn(urt::task_spec{.priority = low_priority}, std::forward<F>(f));
  }
  template <class F>
  void post_urgent(F&& f) {
    rt_.spawn(urt::task_spec{.priority = urgent_priority}, std::forward<F>(f));
  }

  [[nodiscard]] urt::worker_stats totals() const { return rt_.stats().total(); }

 private:
  static urt::runtime_options make_options() {
    urt::runtime_options o;
    o.cpus = "0-1";
    o.idle_spin = microseconds{50};
    return o;
  }
  urt::runtime rt_;
};

class asio_executor {
 public:
  static constexpr const char* name = "asio";

  asio_executor() = default;
  ~asio_executor() { pool_.join(); }
  asio_executor(const asio_executor&) = delete;
  asio_executor& operator=(const asio_executor&) = delete;

  template <class F>
  void post(F&& f) {
    asio::post(pool_, std::forward<F>(f));
  }
  template <class F>
  void post_wake(F&& f) {
    post(std::forward<F>(f));
  }
  template <class F>
  void hold(unsigned /*i*/, F&& f) {
    post(std::forward<F>(f));
  }
  template <class F>
  void hold_low(unsigned /*i*/, F&& f) {
    post(std::forward<F>(f));
  }
  template <class F>
  void post_low(F&& f) {
    post(std::forward<F>(f));
  }
  template <class F>
  void post_urgent(F&& f) {
    post(std::forward<F>(f));
  }

 private:
  asio::thread_pool pool_{threads_per_executor};
};

class tbb_executor {
 public:
  static constexpr const char* name = "oneTBB";

  tbb_executor() {
    normal_.initialize();
    low_.initialize();
    high_.initialize();
  }
  ~tbb_executor() {
    normal_.terminate();
    low_.terminate();
    high_.terminate();
  }
  tbb_executor(const tbb_executor&) = delete;
  tbb_executor& operator=(const tbb_executor&) = delete;

  template <class F>
  void post(F&& f) {
    normal_.enqueue(std::forward<F>(f));
  }
  template <class F>
  void post_wake(F&& f) {
    normal_.enqueue(std::forward<F>(f));
  }
  template <class F>
  void hold(unsigned /*i*/, F&& f) {
    normal_.enqueue(std::forward<F>(f));
  }
  template <class F>
  void hold_low(unsigned /*i*/, F&& f) {
    low_.enqueue(std::forward<F>(f));
  }
  template <class F>
  void post_low(F&& f) {
    low_.enqueue(std::forward<F>(f));
  }
  template <class F>
  void post_urgent(F&& f) {
    high_.enqueue(std::forward<F>(f));
  }

 private:
  static constexpr int slots = static_cast<int>(threads_per_executor);
  // Declared first: it must outlive the arenas. The main thread + 2 workers.
  tbb::global_control parallelism_{tbb::global_control::max_allowed_parallelism,
                                   threads_per_executor + 1};
  tbb::task_arena normal_{slots, 0, tbb::task_arena::priority::normal};
  tbb::task_arena low_{slots, 0, tbb::task_arena::priority::low};
  tbb::task_arena high_{slots, 0, tbb::task_arena::priority::high};
};

// ---------------------------------------------------------------------------

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Nearest-rank percentile (p in 0..100).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(
      std::max(1.0, static_cast<double>(v.size()) * p / 100.0 + 0.999999));
  return v[std::min(rank, v.size()) - 1];
}

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

[[noreturn]] void fail(const char* executor, const char* what) {
  std::fprintf(stderr, "urt-peers: %s: %s\n", executor, what);
  std::exit(1);
}

/// Holds both threads of `ex` (through `hold`), checking that both blockers
/// run at once; `queue` runs while they are held. Returns after opening.
template <class Ex, class Hold, class Queue>
void while_held(Ex& ex, Hold&& hold, Queue&& queue) {
  g_gate.close();
  for (unsigned i = 0; i < threads_per_executor; ++i) hold(ex, i);
  if (!g_gate.all_holding(threads_per_executor)) {
    fail(Ex::name, "its two blocker tasks never ran at the same time (fewer than 2 threads?)");
  }
  queue();
  g_gate.open();
}

// (a) -----------------------------------------------------------------------

template <class Ex>
void post_batch(Ex& ex) {
  for (std::uint32_t i = 0; i < throughput_tasks; ++i) ex.post([] { g_batch.hit(); });
}

/// Two untimed batches queued behind blockers (the first grows the pools to
/// the batch's high-water mark), then one plain batch. Returns the posting
/// cost per task of the second held batch: the producer's side alone, no
/// consumer touching the queues meanwhile.
template <class Ex>
double throughput_warm_up(Ex& ex) {
  std::chrono::duration<double, std::nano> posting{};
  for (int round = 0; round < 2; ++round) {  // the first grows the pools
    g_batch.reset(throughput_tasks);
    while_held(
        ex, [](Ex& e, unsigned i) { e.hold(i, [] { g_gate.hold(); }); },
        [&] {
          const auto t0 = clock_type::now();
          post_batch(ex);
          posting = clock_type::now() - t0;
        });
    wait_set(g_batch.done);
    g_gate.wait_released(threads_per_executor);
  }
  g_batch.reset(throughput_tasks);
  post_batch(ex);
  wait_set(g_batch.done);
  return posting.count() / throughput_tasks;
}

/// urt only: the posting cost per task of a held batch at `priority` (the
/// blockers run at 99), to show how the spawn cost depends on the priority.
double urt_held_posting_ns(urt_executor& ex, int priority) {
  g_batch.reset(throughput_tasks);
  std::chrono::duration<double, std::nano> posting{};
  while_held(
      ex, [](urt_executor& e, unsigned i) { e.hold(i, [] { g_gate.hold(); }); },
      [&] {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < throughput_tasks; ++i) {
          ex.post_at(priority, [] { g_batch.hit(); });
        }
        posting = clock_type::now() - t0;
      });
  wait_set(g_batch.done);
  g_gate.wait_released(threads_per_executor);
  return posting.count() / throughput_tasks;
}

/// The CPU-time clocks of the two threads that run `ex`'s tasks, taken
/// from inside one blocker on each (while_held checks they run at once).
template <class Ex>
std::vector<clockid_t> executor_thread_clocks(Ex& ex) {
  std::mutex m;
  std::vector<clockid_t> ids;
  while_held(
      ex,
      [&](Ex& e, unsigned i) {
        e.hold(i, [&] {
          clockid_t id{};
          if (pthread_getcpuclockid(pthread_self(), &id) == 0) {
            std::lock_guard lock(m);
            ids.push_back(id);
          }
          g_gate.hold();
        });
      },
      [] {});
  g_gate.wait_released(threads_per_executor);
  std::lock_guard lock(m);
  return ids;
}

/// The CPU time those threads have used together; negative when one of
/// them has exited since (its clock is gone).
double threads_cpu_us(const std::vector<clockid_t>& ids) {
  double total = 0;
  for (const clockid_t id : ids) {
    timespec ts{};
    if (clock_gettime(id, &ts) != 0) return -1;
    total += static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
  return total;
}

/// CPU time the calling thread has used.
nanoseconds thread_cpu_time() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds{ts.tv_sec} + nanoseconds{ts.tv_nsec};
}

struct throughput_result {
  double tasks_per_s = 0;
  double post_wall_ns = 0;  // per task: wall time of the posting loop
  double post_cpu_ns = 0;   // per task: the main thread's CPU time in it
};

template <class Ex>
throughput_result throughput_run(Ex& ex) {
  std::this_thread::sleep_for(switch_pause);
  g_batch.reset(throughput_tasks);
  const nanoseconds cpu0 = thread_cpu_time();
  const auto t0 = clock_type::now();
  post_batch(ex);
  const auto posted = clock_type::now();
  const nanoseconds cpu1 = thread_cpu_time();
  wait_set(g_batch.done);
  const std::chrono::duration<double> took = clock_type::now() - t0;
  const std::chrono::duration<double, std::nano> posting = posted - t0;
  return {throughput_tasks / took.count(), posting.count() / throughput_tasks,
          static_cast<double>((cpu1 - cpu0).count()) / throughput_tasks};
}

// (b) -----------------------------------------------------------------------

struct wake_result {
  double latency_us = 0;
  bool same_cpu = false;  // the task ran on the CPU the posting thread was on
};

template <class Ex>
wake_result wake_sample(Ex& ex) {
  std::this_thread::sleep_for(wake_idle);
  g_wake.done.store(0, std::memory_order_relaxed);
  const int post_cpu = sched_getcpu();
  const std::int64_t t0 = now_ns();
  ex.post_wake([] {
    g_wake.t1.store(now_ns(), std::memory_order_relaxed);
    g_wake.cpu.store(sched_getcpu(), std::memory_order_relaxed);
    raise(g_wake.done);
  });
  wait_set(g_wake.done);
  return {static_cast<double>(g_wake.t1.load(std::memory_order_relaxed) - t0) / 1e3,
          g_wake.cpu.load(std::memory_order_relaxed) == post_cpu};
}

// (g): the posting thread keeps its CPU until the task has started.
template <class Ex>
double busy_wake_sample(Ex& ex) {
  std::this_thread::sleep_for(wake_idle);
  g_wake.done.store(0, std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  ex.post_wake([] {
    g_wake.t1.store(now_ns(), std::memory_order_relaxed);
    // Release: pairs with the acquire spin below, which then reads t1.
    g_wake.done.store(1, std::memory_order_release);
  });
  while (g_wake.done.load(std::memory_order_acquire) == 0) {
  }
  return static_cast<double>(g_wake.t1.load(std::memory_order_relaxed) - t0) / 1e3;
}

// (c) -----------------------------------------------------------------------

struct backlog_sample {
  double latency_us = 0;
  double low_run_between = 0;  // low tasks finished between the post and the start
  double low_left_at_post = 0;  // low tasks not yet finished when it was posted
  double settle_us = 0;         // from the gate's opening to the urgent post
};

template <class Ex>
backlog_sample backlog_once(Ex& ex) {
  std::this_thread::sleep_for(switch_pause);
  g_backlog.reset();
  while_held(
      ex, [](Ex& e, unsigned i) { e.hold_low(i, [] { g_gate.hold(); }); },
      [&] {
        for (std::uint32_t i = 0; i < backlog_tasks; ++i) ex.post_low([] { g_backlog.low(); });
      });
  const std::int64_t opened = now_ns();
  // Block until both threads run low tasks (the main thread runs at
  // SCHED_FIFO here, so it gets a CPU back at once when woken).
  wait_set(g_backlog.settled);
  const std::uint32_t done_at_post = g_backlog.low_done.load(std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  ex.post_urgent([] { g_backlog.urgent(); });
  wait_set(g_backlog.all_low_done);
  wait_set(g_backlog.urgent_done);
  g_gate.wait_released(threads_per_executor);
  backlog_sample s;
  s.latency_us = static_cast<double>(g_backlog.t1.load(std::memory_order_relaxed) - t0) / 1e3;
  s.low_run_between = static_cast<double>(
      g_backlog.low_done_at_start.load(std::memory_order_relaxed) - done_at_post);
  s.low_left_at_post = static_cast<double>(backlog_tasks - done_at_post);
  s.settle_us = static_cast<double>(t0 - opened) / 1e3;
  return s;
}

// (d) -----------------------------------------------------------------------

/// One plain burst of `n` low tasks, then the urgent one: its start latency, us.
template <class Ex>
double burst_once(Ex& ex, std::uint32_t n) {
  std::this_thread::sleep_for(switch_pause);
  g_burst.reset(n);
  for (std::uint32_t i = 0; i < n; ++i) ex.post_low([] { g_burst.low(); });
  const std::int64_t t0 = now_ns();
  ex.post_urgent([] { g_burst.urgent(); });
  wait_set(g_burst.urgent_done);
  wait_set(g_burst.all_low_done);
  return static_cast<double>(g_burst.t1.load(std::memory_order_relaxed) - t0) / 1e3;
}

// (e) -----------------------------------------------------------------------

/// The mixed workload on `ex`: the urgent tasks' start latencies, us. With
/// `low_rate` > 0 the feeder also posts at most that many low tasks per
/// second (on a fixed schedule), else as fast as they end.
template <class Ex>
mixed_result mixed_run(Ex& ex, double low_rate = 0) {
  std::this_thread::sleep_for(switch_pause);
  mixed_state& m = g_mixed;
  m.urgent_done.store(0);
  m.feeding.store(true);
  std::thread feeder([&] {
    const auto period = nanoseconds(low_rate > 0 ? static_cast<std::int64_t>(1e9 / low_rate) : 0);
    auto next = clock_type::now();
    for (;;) {
      m.slots.acquire();
      if (!m.feeding.load()) {
        m.slots.release();
        return;
      }
      if (period.count() > 0) {
        next += period;
        std::this_thread::sleep_until(next);
      }
      ex.post_low([&m] {
        spin_for(microseconds{50});
        m.low_done.fetch_add(1, std::memory_order_relaxed);
        m.slots.release();
      });
    }
  });
  const std::uint64_t low_before = m.low_done.load();
  const auto t_begin = clock_type::now();
  std::thread urgent([&] {
    auto next = clock_type::now();
    for (int i = 0; i < mixed_state::samples; ++i) {
      next += microseconds{200};
      std::this_thread::sleep_until(next);
      m.posted_ns[static_cast<std::size_t>(i)] = now_ns();
      ex.post_urgent([&m, i] {
        m.started_ns[static_cast<std::size_t>(i)].store(now_ns(), std::memory_order_relaxed);
        // Release: pairs with the acquire load in the wait below, which then
        // sees this sample's started_ns.
        m.urgent_done.fetch_add(1, std::memory_order_release);
      });
    }
  });
  urgent.join();
  const double window = std::chrono::duration<double>(clock_type::now() - t_begin).count();
  const std::uint64_t low_ran = m.low_done.load() - low_before;
  while (m.urgent_done.load(std::memory_order_acquire) < mixed_state::samples) {
    std::this_thread::sleep_for(microseconds{100});
  }
  // The feeder sees the end when the next low task frees a slot.
  m.feeding.store(false);
  feeder.join();
  // Let the low tasks still in flight finish before the next executor.
  for (int i = 0; i < mixed_state::in_flight; ++i) m.slots.acquire();
  m.slots.release(mixed_state::in_flight);
  mixed_result r;
  r.low_per_s = static_cast<double>(low_ran) / window;
  std::vector<double>& us = r.us;
  for (int i = 0; i < mixed_state::samples; ++i) {
    us.push_back(static_cast<double>(m.started_ns[static_cast<std::size_t>(i)].load() -
                                     m.posted_ns[static_cast<std::size_t>(i)]) /
                 1e3);
  }
  return r;
}

// (f) -----------------------------------------------------------------------

constexpr std::uint32_t counter_tasks = 1'000'000;
alignas(64) std::atomic<std::uint32_t> g_counter{0};
std::atomic<std::uint32_t> g_counter_done{0};

/// One plain post loop of 1M counting lambdas; M tasks/s.
template <class Ex>
double counter_run(Ex& ex) {
  std::this_thread::sleep_for(switch_pause);
  g_counter.store(0);
  g_counter_done.store(0);
  const auto t0 = clock_type::now();
  for (std::uint32_t i = 0; i < counter_tasks; ++i) {
    ex.post([] {
      if (g_counter.fetch_add(1, std::memory_order_relaxed) + 1 == counter_tasks) {
        raise(g_counter_done);
      }
    });
  }
  wait_set(g_counter_done);
  return static_cast<double>(counter_tasks) /
         std::chrono::duration<double>(clock_type::now() - t0).count() / 1e6;
}

/// Threads of this process, besides the caller, not at SCHED_OTHER: none
/// should be (an executor thread created while main ran SCHED_FIFO would
/// have inherited it).
int other_realtime_threads() {
  const auto self = static_cast<pid_t>(syscall(SYS_gettid));
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir)) {
      const int tid = std::atoi(entry->d_name);
      if (tid <= 0 || tid == self) continue;
      const int policy = sched_getscheduler(tid);
      if (policy >= 0 && policy != SCHED_OTHER) ++n;
    }
    closedir(dir);
  }
  return n;
}

// ---------------------------------------------------------------------------

struct results {
  std::vector<double> throughput;  // tasks/s per run
  std::vector<double> wake_us;
  std::vector<double> wake_same_cpu_us;   // task ran on the poster's CPU
  std::vector<double> wake_other_cpu_us;  // task ran on the other CPU
  std::vector<double> busy_wake_us;       // (g)
  double post_held_ns = 0;                // (a) post cost per task, workers held
  std::vector<double> post_wall_ns;       // (a) timed runs: posting loop, per task
  std::vector<double> post_cpu_ns;        // (a) timed runs: main's CPU in it, per task
  std::vector<double> urgent_us;
  std::vector<double> low_between;
  std::vector<double> low_left;
  std::vector<double> settle_us;
};

std::string fixed(double v, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string ratio_text(double num, double den) {
  if (den <= 0) return "n/a";
  const double r = num / den;
  char text[32];
  if (r != 0 && r < 0.01) {
    std::snprintf(text, sizeof text, "%.2e", r);
  } else {
    std::snprintf(text, sizeof text, "%.3f", r);
  }
  return text;
}

void row(const char* label, double u, double a, double t, int decimals) {
  std::printf("%-32s %10s %10s %10s %10s %11s\n", label, fixed(u, decimals).c_str(),
              fixed(a, decimals).c_str(), fixed(t, decimals).c_str(), ratio_text(u, a).c_str(),
              ratio_text(u, t).c_str());
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

int main() {
  urt_executor urt_ex;
  asio_executor asio_ex;
  tbb_executor tbb_ex;
  results ru;
  results ra;
  results rt;

  // (a) ---------------------------------------------------------------------
  ru.post_held_ns = throughput_warm_up(urt_ex);
  ra.post_held_ns = throughput_warm_up(asio_ex);
  rt.post_held_ns = throughput_warm_up(tbb_ex);
  const auto record_throughput = [](results& res, throughput_result r) {
    res.throughput.push_back(r.tasks_per_s);
    res.post_wall_ns.push_back(r.post_wall_ns);
    res.post_cpu_ns.push_back(r.post_cpu_ns);
  };
  for (int r = 0; r < throughput_runs; ++r) {
    record_throughput(ru, throughput_run(urt_ex));
    record_throughput(ra, throughput_run(asio_ex));
    record_throughput(rt, throughput_run(tbb_ex));
  }
  std::printf("(a) throughput, %u empty tasks from one external thread, M tasks/s per run:\n",
              throughput_tasks);
  for (const auto& [name, res] :
       {std::pair{"urt", &ru}, std::pair{"asio", &ra}, std::pair{"oneTBB", &rt}}) {
    std::printf("    %-7s", name);
    for (const double v : res->throughput) std::printf(" %7.3f", v / 1e6);
    std::printf("\n");
  }
  std::printf(
      "    posting, ns/task: workers held (producer alone) / timed runs' posting loop, median "
      "wall / main thread's CPU in it (the rest: waiting for a CPU)\n");
  for (const auto& [name, res] :
       {std::pair{"urt", &ru}, std::pair{"asio", &ra}, std::pair{"oneTBB", &rt}}) {
    std::printf("    %-7s %5.0f / %5.0f / %5.0f\n", name, res->post_held_ns,
                median(res->post_wall_ns), median(res->post_cpu_ns));
  }
  std::printf("    urt posting alone by task priority (workers held at 99), best of 3, ns/task:");
  for (const int p : {0, 1, throughput_priority, 50, 98}) {
    double best = urt_held_posting_ns(urt_ex, p);
    for (int k = 1; k < 3; ++k) best = std::min(best, urt_held_posting_ns(urt_ex, p));
    std::printf(" p%d %.0f", p, best);
  }
  std::printf("\n");

  // (b) ---------------------------------------------------------------------
  // Each pool's threads' CPU time over the whole phase: what idling and
  // waking costs them (a faster wake-up must not be bought with more spin).
  const std::vector<clockid_t> clocks[3] = {executor_thread_clocks(urt_ex),
                                            executor_thread_clocks(asio_ex),
                                            executor_thread_clocks(tbb_ex)};
  double cpu_before[3];
  for (int k = 0; k < 3; ++k) cpu_before[k] = threads_cpu_us(clocks[k]);
  const urt::worker_stats before_wake = urt_ex.totals();
  const auto record_wake = [](results& res, wake_result w) {
    res.wake_us.push_back(w.latency_us);
    (w.same_cpu ? res.wake_same_cpu_us : res.wake_other_cpu_us).push_back(w.latency_us);
  };
  std::mt19937 order_rng(order_seed);
  for (int i = 0; i < wake_samples; ++i) {
    in_shuffled_order(order_rng, [&](int pool) {
      if (pool == 0) record_wake(ru, wake_sample(urt_ex));
      if (pool == 1) record_wake(ra, wake_sample(asio_ex));
      if (pool == 2) record_wake(rt, wake_sample(tbb_ex));
    });
  }
  const urt::worker_stats after_wake = urt_ex.totals();
  double wake_cpu_us[3];
  for (int k = 0; k < 3; ++k) {
    const double after = threads_cpu_us(clocks[k]);
    wake_cpu_us[k] = cpu_before[k] < 0 || after < 0
                         ? -1
                         : (after - cpu_before[k]) / static_cast<double>(wake_samples);
  }
  std::printf(
      "(b) idle wake, %d samples after %lld ms idle: urt parked %llu times and was rung %llu "
      "times during them\n",
      wake_samples, static_cast<long long>(wake_idle.count()),
      static_cast<unsigned long long>(after_wake.parks - before_wake.parks),
      static_cast<unsigned long long>(after_wake.doorbells - before_wake.doorbells));
  std::printf("    the task ran on the posting thread's CPU / on the other CPU: samples, p50 us\n");
  for (const auto& [name, res] :
       {std::pair{"urt", &ru}, std::pair{"asio", &ra}, std::pair{"oneTBB", &rt}}) {
    std::printf("    %-7s same %5zu  %8.2f   other %5zu  %8.2f\n", name,
                res->wake_same_cpu_us.size(), percentile(res->wake_same_cpu_us, 50),
                res->wake_other_cpu_us.size(), percentile(res->wake_other_cpu_us, 50));
  }
  std::printf("    CPU time of the pool's two threads per sample (%lld ms idle, then the wake-up "
              "and the task), us: urt %s, asio %s, oneTBB %s\n",
              static_cast<long long>(wake_idle.count()),
              wake_cpu_us[0] < 0 ? "n/a" : fixed(wake_cpu_us[0], 2).c_str(),
              wake_cpu_us[1] < 0 ? "n/a" : fixed(wake_cpu_us[1], 2).c_str(),
              wake_cpu_us[2] < 0 ? "n/a" : fixed(wake_cpu_us[2], 2).c_str());

  // (g) ---------------------------------------------------------------------
  const urt::worker_stats before_busy = urt_ex.totals();
  for (int i = 0; i < busy_wake_samples; ++i) {
    in_shuffled_order(order_rng, [&](int pool) {
      if (pool == 0) ru.busy_wake_us.push_back(busy_wake_sample(urt_ex));
      if (pool == 1) ra.busy_wake_us.push_back(busy_wake_sample(asio_ex));
      if (pool == 2) rt.busy_wake_us.push_back(busy_wake_sample(tbb_ex));
    });
  }
  const urt::worker_stats after_busy = urt_ex.totals();
  std::printf("(g) idle wake, the posting thread busy after the post (it spins until the task "
              "starts), %d samples after %lld ms idle, us: p50 / p99 / max; urt's spawner "
              "yielded its CPU to the worker it woke %llu times\n",
              busy_wake_samples, static_cast<long long>(wake_idle.count()),
              static_cast<unsigned long long>(after_busy.wake_yields - before_busy.wake_yields));
  for (const auto& [name, res] :
       {std::pair{"urt", &ru}, std::pair{"asio", &ra}, std::pair{"oneTBB", &rt}}) {
    std::printf("    %-7s %8.2f / %8.2f / %8.2f\n", name, percentile(res->busy_wake_us, 50),
                percentile(res->busy_wake_us, 99), max_of(res->busy_wake_us));
  }

  // (c) ---------------------------------------------------------------------
  const bool main_fifo = set_main_fifo(main_fifo_priority);
  if (!main_fifo) {
    std::printf("(c) note: SCHED_FIFO refused for the main thread; it runs SCHED_OTHER and may "
                "wake late, leaving fewer low tasks queued at the urgent post\n");
  }
  for (int i = 0; i < backlog_samples; ++i) {
    for (auto [ex_res, s] : {std::pair{&ru, backlog_once(urt_ex)},
                             std::pair{&ra, backlog_once(asio_ex)},
                             std::pair{&rt, backlog_once(tbb_ex)}}) {
      ex_res->urgent_us.push_back(s.latency_us);
      ex_res->low_between.push_back(s.low_run_between);
      ex_res->low_left.push_back(s.low_left_at_post);
      ex_res->settle_us.push_back(s.settle_us);
    }
  }
  if (main_fifo) set_main_fifo(0);
  if (const int n = other_realtime_threads(); n != 0) {
    std::printf("(c) warning: %d thread(s) besides main run a real-time policy\n", n);
  }
  std::printf(
      "(c) urgent behind %u x 1-us low tasks, %d samples; medians of: low tasks unfinished at "
      "the urgent post / low tasks finished between its post and its start / us from the "
      "backlog's release to the urgent post\n",
      backlog_tasks, backlog_samples);
  for (const auto& [name, res] :
       {std::pair{"urt", &ru}, std::pair{"asio", &ra}, std::pair{"oneTBB", &rt}}) {
    const auto slowest = static_cast<std::size_t>(
        std::max_element(res->urgent_us.begin(), res->urgent_us.end()) - res->urgent_us.begin());
    std::printf("    %-7s %7.0f / %7.0f / %7.1f   slowest sample: %.1f us, %.0f low tasks "
                "finished meanwhile\n",
                name, median(res->low_left), median(res->low_between), median(res->settle_us),
                res->urgent_us[slowest], res->low_between[slowest]);
  }

  // (d) ---------------------------------------------------------------------
  constexpr std::uint32_t burst_sizes[] = {100, 1000, 10000};
  std::vector<double> burst_u[3];
  std::vector<double> burst_a;
  std::vector<double> burst_t[3];
  for (int i = 0; i < burst_samples; ++i) {
    for (int k = 0; k < 3; ++k) {
      burst_u[k].push_back(burst_once(urt_ex, burst_sizes[k]));
      burst_t[k].push_back(burst_once(tbb_ex, burst_sizes[k]));
    }
    burst_a.push_back(burst_once(asio_ex, burst_sizes[0]));
  }
  std::printf("(d) plain burst from the SCHED_OTHER main thread, no settling: the urgent task's "
              "start, us, p50 / p90 / max of %d\n",
              burst_samples);
  std::printf("    %-8s %24s %24s %24s\n", "burst", "urt", "oneTBB (high arena)", "asio");
  const auto p50_p90_max = [](const std::vector<double>& v) {
    return fixed(percentile(v, 50), 1) + " / " + fixed(percentile(v, 90), 1) + " / " +
           fixed(max_of(v), 1);
  };
  for (int k = 0; k < 3; ++k) {
    const std::string a = k == 0 ? p50_p90_max(burst_a) : "-";
    std::printf("    %-8u %24s %24s %24s\n", burst_sizes[k], p50_p90_max(burst_u[k]).c_str(),
                p50_p90_max(burst_t[k]).c_str(), a.c_str());
  }
  // (e) ---------------------------------------------------------------------
  std::vector<double> mixed_u;
  std::vector<double> mixed_a;
  std::vector<double> mixed_t;
  double low_u = 0;
  double low_a = 0;
  double low_t = 0;
  for (int round = 0; round < 2; ++round) {
    const mixed_result u = mixed_run(urt_ex);
    const mixed_result a = mixed_run(asio_ex);
    const mixed_result t = mixed_run(tbb_ex);
    mixed_u.insert(mixed_u.end(), u.us.begin(), u.us.end());
    mixed_a.insert(mixed_a.end(), a.us.begin(), a.us.end());
    mixed_t.insert(mixed_t.end(), t.us.begin(), t.us.end());
    low_u += u.low_per_s / 2;
    low_a += a.low_per_s / 2;
    low_t += t.low_per_s / 2;
  }
  std::printf("(e) mixed: 8 x 50-us low tasks kept in flight by a feeder thread, an urgent task "
              "every 200 us from another thread; its start, us, %zu samples each: p50 / p99 / "
              "max; and the low tasks run per second meanwhile (the bulk throughput; "
              "two workers kept busy run 40000/s)\n",
              mixed_u.size());
  // urt again, its feeder paced to oneTBB's bulk rate.
  std::vector<double> mixed_paced;
  double low_paced = 0;
  for (int round = 0; round < 2; ++round) {
    const mixed_result u = mixed_run(urt_ex, low_t);
    mixed_paced.insert(mixed_paced.end(), u.us.begin(), u.us.end());
    low_paced += u.low_per_s / 2;
  }
  for (const auto& [name, v, low] :
       {std::tuple{"urt", &mixed_u, low_u}, std::tuple{"asio", &mixed_a, low_a},
        std::tuple{"oneTBB", &mixed_t, low_t},
        std::tuple{"urt fed at oneTBB's rate", &mixed_paced, low_paced}}) {
    std::printf("    %-24s %8.1f / %8.1f / %8.1f   low tasks %6.0f/s\n", name, percentile(*v, 50),
                percentile(*v, 99), max_of(*v), low);
  }

  // (f) ---------------------------------------------------------------------
  std::vector<double> count_u;
  std::vector<double> count_a;
  std::vector<double> count_t;
  for (int r = 0; r < 5; ++r) {
    count_u.push_back(counter_run(urt_ex));
    count_a.push_back(counter_run(asio_ex));
    count_t.push_back(counter_run(tbb_ex));
  }
  std::printf("(f) shared counter: %u lambdas from the main thread, pools simply running, M tasks/s, "
              "median of 5: urt %.2f, asio %.2f, oneTBB %.2f (urt/asio %.2f, urt/oneTBB %.2f)\n",
              counter_tasks, median(count_u), median(count_a), median(count_t),
              median(count_u) / median(count_a), median(count_u) / median(count_t));

  bool burst_ok = true;
  for (int k = 0; k < 3; ++k) burst_ok = burst_ok && percentile(burst_u[k], 50) <= percentile(burst_t[k], 50);
  const double growth = percentile(burst_u[2], 50) / percentile(burst_u[0], 50);

  // Summary -------------------------------------------------------------------
  const double tp_u = median(ru.throughput) / 1e6;
  const double tp_a = median(ra.throughput) / 1e6;
  const double tp_t = median(rt.throughput) / 1e6;
  const double w50_u = percentile(ru.wake_us, 50);
  const double w50_a = percentile(ra.wake_us, 50);
  const double w50_t = percentile(rt.wake_us, 50);
  const double u50_u = percentile(ru.urgent_us, 50);
  const double u50_a = percentile(ra.urgent_us, 50);
  const double u50_t = percentile(rt.urgent_us, 50);

  std::printf("\n%-32s %10s %10s %10s %10s %11s\n", "workload", "urt", "asio", "oneTBB",
              "urt/asio", "urt/oneTBB");
  row("throughput (M tasks/s)", tp_u, tp_a, tp_t, 3);
  row("idle wake p50 (us)", w50_u, w50_a, w50_t, 2);
  row("idle wake p99 (us)", percentile(ru.wake_us, 99), percentile(ra.wake_us, 99),
      percentile(rt.wake_us, 99), 2);
  row("busy wake p99 (us)", percentile(ru.busy_wake_us, 99), percentile(ra.busy_wake_us, 99),
      percentile(rt.busy_wake_us, 99), 2);
  row("busy wake max (us)", max_of(ru.busy_wake_us), max_of(ra.busy_wake_us),
      max_of(rt.busy_wake_us), 2);
  row("urgent behind 10k p50 (us)", u50_u, u50_a, u50_t, 2);
  row("urgent behind 10k max (us)", max_of(ru.urgent_us), max_of(ra.urgent_us),
      max_of(rt.urgent_us), 2);
  std::printf("(throughput: higher is better; latencies: lower is better)\n\n");

  std::printf("throughput >= 2x both peers: %s\n", yes_no(tp_u >= 2 * tp_a && tp_u >= 2 * tp_t));
  const double w99_u = percentile(ru.wake_us, 99);
  const double w99_best = std::min(percentile(ra.wake_us, 99), percentile(rt.wake_us, 99));
  std::printf("idle wake p50 and p99 no worse than the best peer: %s (p50 %.2f vs %.2f, p99 %.2f "
              "vs %.2f)\n",
              yes_no(w50_u <= std::min(w50_a, w50_t) && w99_u <= w99_best), w50_u,
              std::min(w50_a, w50_t), w99_u, w99_best);
  const double bw99_u = percentile(ru.busy_wake_us, 99);
  const double bw99_best =
      std::min(percentile(ra.busy_wake_us, 99), percentile(rt.busy_wake_us, 99));
  const double bwmax_best = std::min(max_of(ra.busy_wake_us), max_of(rt.busy_wake_us));
  std::printf("busy wake: urt p99 and max no worse than the best peer: %s (p99 %.2f vs %.2f, max "
              "%.2f vs %.2f)\n",
              yes_no(bw99_u <= bw99_best && max_of(ru.busy_wake_us) <= bwmax_best), bw99_u,
              bw99_best, max_of(ru.busy_wake_us), bwmax_best);
  std::printf("urgent-behind-10k p50 no worse than oneTBB high-priority arena: %s\n",
              yes_no(u50_u <= u50_t));
  std::printf("urgent-behind-10k p50 at least 1000x better than asio: %s\n",
              yes_no(u50_u * 1000 <= u50_a));
  std::printf("plain burst: urt p50 at most oneTBB's at every size: %s\n", yes_no(burst_ok));
  std::printf("plain burst: urt p50 at 10,000 at most 2x its p50 at 100: %s (%.2fx)\n",
              yes_no(growth <= 2), growth);
  const double best_p99 = std::min(percentile(mixed_a, 99), percentile(mixed_t, 99));
  const double best_max = std::min(max_of(mixed_a), max_of(mixed_t));
  std::printf("mixed: urt p99 and max no worse than the best peer: %s (p99 %.1f vs %.1f, max "
              "%.1f vs %.1f)\n",
              yes_no(percentile(mixed_u, 99) <= best_p99 && max_of(mixed_u) <= best_max),
              percentile(mixed_u, 99), best_p99, max_of(mixed_u), best_max);
  std::printf("mixed, urt fed at oneTBB's bulk rate: p99 and max no worse than oneTBB's: %s (p99 "
              "%.1f vs %.1f, max %.1f vs %.1f; low tasks %.0f/s vs %.0f/s)\n",
              yes_no(percentile(mixed_paced, 99) <= percentile(mixed_t, 99) &&
                     max_of(mixed_paced) <= max_of(mixed_t)),
              percentile(mixed_paced, 99), percentile(mixed_t, 99), max_of(mixed_paced),
              max_of(mixed_t), low_paced, low_t);
  std::printf("shared counter: urt at least 2x both peers: %s\n",
              yes_no(median(count_u) >= 2 * median(count_a) && median(count_u) >= 2 * median(count_t)));
  return 0;
}
