// urt-spawn-bench: spawn throughput and heap allocations per spawn.
//
//   BM_urt_local_spawn        1 worker (cpus "0"): one driver task spawns
//                             tasks_per_batch empty tasks onto its own worker.
//   BM_urt_external_spawn     2 workers (cpus "0-1"): the benchmark thread
//                             spawns tasks_per_batch counting tasks.
//   BM_asio_thread_pool_post  the peer: asio::thread_pool(2), the benchmark
//                             thread posts tasks_per_batch counting callables.
//   BM_urt_executor_post      urt::executor (urt/executor.hpp) on the same 2
//                             workers: asio::post(ex, f) of the same callables.
//   BM_asio_io_context_post   the second peer: one io_context run by 2 threads.
//   BM_*_defer_chain          urt::executor, asio::thread_pool(2) and the
//                             io_context: one chain of tasks_per_batch steps,
//                             each asio::defer's the next (a continuation).
//   BM_urt_coroutine_yield    a coroutine on urt::executor doing
//                             co_await urt::yield() tasks_per_batch times,
//                             against BM_asio_thread_pool_coroutine_post: the
//                             same on asio::thread_pool(2) with co_await
//                             asio::post(asio::use_awaitable).
//   BM_urt_external_spawn_io  BM_urt_external_spawn while each worker has a
//                             socket read pending (Asio work outstanding, so
//                             it polls its reactor at scheduling points), at
//                             io_poll_interval 10 us (the default) and 0: what
//                             worker-owned I/O costs short tasks.
//
// After the benchmarks, idle wake through an executor: the pool is left idle
// for 2 ms, then t0, one asio::post, t1 on entry; t1 - t0 over 300 samples
// per executor (urt::executor, asio::thread_pool, the io_context), taken in
// turns, p50 and p99.
//
// Each iteration is one batch; it ends once every task of the batch has run.
// The runtime (or pool) lives across iterations and across the library's
// repeated calls of a benchmark function, so thread start-up is not timed.
// Global operator new/delete are replaced to count allocations; the count is
// taken around each timed batch only, after the node pool has been grown to
// the workload's high-water mark and warm-up batches have run, and it is
// reported per task spawned (any thread's allocations count: the workers'
// too). aligned_alloc is counted as well (see below); plain malloc calls made
// by C libraries (liburcu, hwloc) are not seen.
//
// DESIGN.md ("How results are measured"): an absolute time on these 2-core
// machines means little, so main() prints the urt/asio throughput ratio
// measured in this same run, taken from the reported items_per_second.

#include <unistd.h>

#include <benchmark/benchmark.h>
#include <asio/co_spawn.hpp>
#include <asio/defer.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "urt/executor.hpp"
#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/runtime.hpp"
#include "urt/stats.hpp"
#include "urt/task.hpp"

// ---------------------------------------------------------------------------
// Counting global allocation functions. Every replaceable operator new form
// counts one allocation and forwards to malloc (posix_memalign when
// over-aligned); every operator delete form forwards to free.

namespace {

std::atomic<std::uint64_t> g_allocations{0};

std::uint64_t allocations() noexcept { return g_allocations.load(std::memory_order_relaxed); }

void* counted_alloc(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  for (;;) {
    if (void* p = std::malloc(size)) return p;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* counted_alloc(std::size_t size, std::align_val_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t alignment = std::max(static_cast<std::size_t>(align), sizeof(void*));
  if (size == 0) size = 1;
  for (;;) {
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size) == 0) return p;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

void* operator new(std::size_t size) { return counted_alloc(size); }
void* operator new[](std::size_t size) { return counted_alloc(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) { return counted_alloc(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) {
  return counted_alloc(size, align);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size, align);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size, align);
  } catch (...) {
    return nullptr;
  }
}

// Asio allocates its handler memory through asio::aligned_new, which calls
// std::aligned_alloc rather than ::operator new when <asio/detail/config.hpp>
// finds _GLIBCXX_HAVE_ALIGNED_ALLOC already defined, i.e. when any libstdc++
// header was included before the first Asio header. Which one a build gets
// thus depends on include order (and, as the function is inline, on which
// translation unit's copy the linker keeps), so aligned_alloc is counted too.
// glibc lets a program interpose it; posix_memalign is glibc's own, and the
// block is released by free like any other.
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  if (posix_memalign(&p, std::max(alignment, sizeof(void*)), size == 0 ? 1 : size) != 0) {
    return nullptr;
  }
  return p;
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

// ---------------------------------------------------------------------------

namespace {

/// Tasks per timed iteration (one batch).
constexpr std::uint64_t tasks_per_batch = std::uint64_t{1} << 16;
/// Untimed batches run each time a benchmark function is entered.
constexpr int warmup_batches = 2;
/// Extra nodes the pool is grown by, beyond one batch: the per-thread
/// magazines (up to 2 * 64 nodes on each worker, 64 on the spawner).
constexpr std::uint64_t prime_slack = 4096;

const urt::task_spec spec{.priority = 10};

/// One batch of tasks: each task bumps `ran`; the one that brings it to
/// tasks_per_batch raises `done` and wakes the benchmark thread.
struct batch {
  alignas(64) std::atomic<std::uint64_t> ran{0};
  alignas(64) std::atomic<std::uint32_t> done{0};

  /// Benchmark thread, before spawning (all tasks of the last batch are
  /// known to have finished; spawning publishes the stores).
  void reset() noexcept {
    ran.store(0, std::memory_order_relaxed);
    done.store(0, std::memory_order_relaxed);
  }
  /// Tasks running on several threads.
  void hit_shared() noexcept {
    if (ran.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks_per_batch) finish();
  }
  /// Tasks all running on one thread (one worker): a load and a store.
  void hit_single_writer() noexcept {
    const std::uint64_t n = ran.load(std::memory_order_relaxed) + 1;
    ran.store(n, std::memory_order_relaxed);
    if (n == tasks_per_batch) finish();
  }
  void finish() noexcept {
    done.store(1, std::memory_order_release);
    done.notify_one();
  }
  /// Benchmark thread: blocks (futex) until the batch has run.
  void wait() const noexcept {
    while (done.load(std::memory_order_acquire) == 0) done.wait(0, std::memory_order_acquire);
  }
};

batch g_batch;  // global: outlives every runtime and pool, so a late notify is harmless

// The executors, kept across iterations and across calls of a benchmark
// function; entering a benchmark tears down the others so that only one
// set of threads exists at a time.
std::unique_ptr<urt::runtime> g_local_rt;     // 1 worker
std::unique_ptr<urt::runtime> g_external_rt;  // 2 workers
std::unique_ptr<asio::thread_pool> g_pool;    // 2 threads

/// The second peer: one io_context, two threads running it.
struct io_pool {
  asio::io_context io{2};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread a{[this] { io.run(); }};
  std::thread b{[this] { io.run(); }};
  ~io_pool() {
    work.reset();
    io.stop();
    a.join();
    b.join();
  }
};
std::unique_ptr<io_pool> g_io;

/// Each worker of a runtime with a socket read pending that never
/// completes: Asio work is outstanding on every worker.
struct pending_reads {
  explicit pending_reads(urt::runtime& rt) {
    for (unsigned w = 0; w < rt.worker_count(); ++w) {
      const urt::executor ex = rt.executor({.affinity = urt::worker_set{w}});
      acceptors.emplace_back(std::make_unique<urt::net::tcp_acceptor>(
          ex, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)));
      clients.emplace_back(std::make_unique<asio::ip::tcp::socket>(client_io));
      clients.back()->connect(acceptors.back()->local_endpoint());
      servers.emplace_back(std::make_unique<urt::net::tcp_socket>(acceptors.back()->accept()));
      servers.back()->async_read_some(asio::buffer(buf), [](const std::error_code&, std::size_t) {});
    }
  }
  ~pending_reads() {
    for (auto& s : servers) s->close();  // the reads complete as aborted
  }
  asio::io_context client_io;
  std::vector<std::unique_ptr<urt::net::tcp_acceptor>> acceptors;
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> clients;
  std::vector<std::unique_ptr<urt::net::tcp_socket>> servers;
  char buf[16]{};
};

std::unique_ptr<urt::runtime> g_io_rt;  // 2 workers, io_poll_interval set per benchmark
std::unique_ptr<pending_reads> g_reads;
std::chrono::nanoseconds g_io_rt_interval{-1};

enum class executor_kind { urt_local, urt_external, asio_pool, asio_io, urt_io };

void keep_only(executor_kind keep) {
  if (keep != executor_kind::urt_local) g_local_rt.reset();
  if (keep != executor_kind::urt_external) g_external_rt.reset();
  if (keep != executor_kind::asio_pool && g_pool) {
    g_pool->join();
    g_pool.reset();
  }
  if (keep != executor_kind::asio_io) g_io.reset();
  if (keep != executor_kind::urt_io) {
    g_reads.reset();
    g_io_rt.reset();
  }
}

urt::runtime& urt_runtime(std::unique_ptr<urt::runtime>& slot, const char* cpus,
                          std::chrono::nanoseconds io_poll_interval = std::chrono::microseconds{10}) {
  if (!slot) {
    urt::runtime_options opts;
    opts.cpus = cpus;
    opts.idle_spin = std::chrono::microseconds{50};
    opts.io_poll_interval = io_poll_interval;
    slot = std::make_unique<urt::runtime>(std::move(opts));
  }
  return *slot;
}

void report(benchmark::State& state, std::uint64_t allocs, const char* alloc_counter) {
  const auto tasks = static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch;
  state.SetItemsProcessed(static_cast<std::int64_t>(tasks));
  state.counters[alloc_counter] = benchmark::Counter(
      tasks == 0 ? 0.0 : static_cast<double>(allocs) / static_cast<double>(tasks));
}

// Tasks completed once every accepted task has been counted. A worker counts
// a task completed just after it returned, so the last task's count may
// trail the wake-up it caused: allow it a moment.
std::uint64_t settled_completed(const urt::runtime& rt) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{1};
  for (;;) {
    const urt::worker_stats total = rt.stats().total();
    if (total.completed == total.accepted || std::chrono::steady_clock::now() >= deadline) {
      return total.completed;
    }
    std::this_thread::yield();
  }
}

void check_completed(benchmark::State& state, const urt::runtime& rt, std::uint64_t before,
                     std::uint64_t expected) {
  const std::uint64_t got = settled_completed(rt) - before;
  if (got != expected) {
    state.SkipWithError(
        ("completed " + std::to_string(got) + " tasks, expected " + std::to_string(expected))
            .c_str());
  }
}

// Read by the blocker tasks below; global, so that a blocker never outlives it.
std::atomic<bool> g_hold{false};

// Grows the runtime's node pool to the high-water mark of these workloads
// before anything is measured. Without it the pool keeps growing (a 64-node
// chunk at a time) whenever a batch happens to get further ahead of the
// workers than any batch before, which shows up as a trickle of allocations
// long after warm-up. With every worker held by a blocker task, one batch
// plus slack is queued, so every node a timed batch can need exists.
void prime_node_pool(urt::runtime& rt) {
  g_hold.store(true, std::memory_order_relaxed);
  for (unsigned w = 0; w < rt.worker_count(); ++w) {
    rt.spawn(urt::task_spec{.priority = urt::priority_max, .affinity = urt::worker_set{w}}, [] {
      while (g_hold.load(std::memory_order_acquire)) g_hold.wait(true, std::memory_order_acquire);
    });
  }
  for (std::uint64_t i = 0; i < tasks_per_batch + prime_slack; ++i) rt.spawn(spec, [] {});
  g_hold.store(false, std::memory_order_release);
  g_hold.notify_all();
  settled_completed(rt);
}

urt::runtime& primed_runtime(std::unique_ptr<urt::runtime>& slot, const char* cpus) {
  const bool fresh = !slot;
  urt::runtime& rt = urt_runtime(slot, cpus);
  if (fresh) prime_node_pool(rt);
  return rt;
}

// ---------------------------------------------------------------------------

// One timed batch per iteration; the heap allocations the timed batches made.
template <class Batch>
std::uint64_t timed_batches(benchmark::State& state, Batch batch) {
  std::uint64_t allocs = 0;
  for (auto _ : state) {
    const std::uint64_t a0 = allocations();
    batch();
    allocs += allocations() - a0;
  }
  return allocs;
}

// tasks_per_batch counting tasks handed to `post` from this thread; returns
// once all have run.
template <class Post>
void counting_batch(Post post) {
  g_batch.reset();
  for (std::uint64_t i = 0; i < tasks_per_batch; ++i) post([] { g_batch.hit_shared(); });
  g_batch.wait();
}

void local_batch(urt::runtime& rt) {
  g_batch.reset();
  urt::runtime* r = &rt;
  rt.spawn(spec, [r] {
    // Inside a task: every spawn goes to this task's own worker (the only one).
    for (std::uint64_t i = 0; i < tasks_per_batch; ++i) {
      r->spawn(spec, [] { g_batch.hit_single_writer(); });
    }
  });
  g_batch.wait();
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_local_spawn(benchmark::State& state) {
  keep_only(executor_kind::urt_local);
  urt::runtime& rt = primed_runtime(g_local_rt, "0");
  for (int i = 0; i < warmup_batches; ++i) local_batch(rt);
  const std::uint64_t completed_before = settled_completed(rt);
  const std::uint64_t allocs = timed_batches(state, [&] { local_batch(rt); });
  // Per batch: the driver and its tasks_per_batch children.
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * (tasks_per_batch + 1));
  report(state, allocs, "allocs/spawn");
}

void external_batch(urt::runtime& rt) {
  counting_batch([&](auto task) { rt.spawn(spec, std::move(task)); });
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_external_spawn(benchmark::State& state) {
  keep_only(executor_kind::urt_external);
  urt::runtime& rt = primed_runtime(g_external_rt, "0-1");
  for (int i = 0; i < warmup_batches; ++i) external_batch(rt);
  const std::uint64_t completed_before = settled_completed(rt);
  const std::uint64_t allocs = timed_batches(state, [&] { external_batch(rt); });
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch);
  report(state, allocs, "allocs/spawn");
}

void asio_batch(asio::thread_pool& pool) {
  counting_batch([&](auto task) { asio::post(pool, std::move(task)); });
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_thread_pool_post(benchmark::State& state) {
  keep_only(executor_kind::asio_pool);
  if (!g_pool) g_pool = std::make_unique<asio::thread_pool>(2);
  asio::thread_pool& pool = *g_pool;
  for (int i = 0; i < warmup_batches; ++i) asio_batch(pool);
  const std::uint64_t allocs = timed_batches(state, [&] { asio_batch(pool); });
  report(state, allocs, "allocs/post");
}

void executor_batch(const urt::executor& ex) {
  counting_batch([&](auto task) { asio::post(ex, std::move(task)); });
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_executor_post(benchmark::State& state) {
  keep_only(executor_kind::urt_external);
  urt::runtime& rt = primed_runtime(g_external_rt, "0-1");
  const urt::executor ex = rt.executor(spec);
  for (int i = 0; i < warmup_batches; ++i) executor_batch(ex);
  const std::uint64_t completed_before = settled_completed(rt);
  const std::uint64_t allocs = timed_batches(state, [&] { executor_batch(ex); });
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch);
  report(state, allocs, "allocs/post");
}

void io_batch(asio::io_context& io) {
  counting_batch([&](auto task) { asio::post(io, std::move(task)); });
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_io_context_post(benchmark::State& state) {
  keep_only(executor_kind::asio_io);
  if (!g_io) g_io = std::make_unique<io_pool>();
  for (int i = 0; i < warmup_batches; ++i) io_batch(g_io->io);
  const std::uint64_t allocs = timed_batches(state, [&] { io_batch(g_io->io); });
  report(state, allocs, "allocs/post");
}

// A chain of continuations: each step counts down and asio::defer's the
// next on the same executor, the pattern of a state machine or a coroutine
// that reschedules itself; one chain of tasks_per_batch steps per batch. It
// measures the hand-off from one step to the next: Asio's schedulers keep a
// continuation on the calling thread, and so does urt::executor (defer from
// a task queues on the caller's worker). The other worker stays idle.
template <class Executor>
struct defer_chain {
  Executor ex;
  std::uint64_t left = 0;  // touched by one step at a time: each defers the next
  void step() {
    // The last step touches nothing of the chain after finish(): run()
    // returns on it, and the chain may be gone.
    if (--left == 0) {
      g_batch.finish();
    } else {
      asio::defer(ex, [this] { step(); });
    }
  }
  void run() {
    g_batch.reset();
    left = tasks_per_batch;
    asio::post(ex, [this] { step(); });
    g_batch.wait();
  }
};

template <class Executor>
void run_defer_chain(benchmark::State& state, const Executor& ex) {
  defer_chain<Executor> chain{ex};
  for (int i = 0; i < warmup_batches; ++i) chain.run();
  const std::uint64_t allocs = timed_batches(state, [&] { chain.run(); });
  report(state, allocs, "allocs/post");
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_executor_defer_chain(benchmark::State& state) {
  keep_only(executor_kind::urt_external);
  urt::runtime& rt = primed_runtime(g_external_rt, "0-1");
  const std::uint64_t completed_before = settled_completed(rt);
  run_defer_chain(state, rt.executor(spec));
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations() + warmup_batches) *
                      tasks_per_batch);
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_thread_pool_defer_chain(benchmark::State& state) {
  keep_only(executor_kind::asio_pool);
  if (!g_pool) g_pool = std::make_unique<asio::thread_pool>(2);
  run_defer_chain(state, g_pool->get_executor());
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_io_context_defer_chain(benchmark::State& state) {
  keep_only(executor_kind::asio_io);
  if (!g_io) g_io = std::make_unique<io_pool>();
  run_defer_chain(state, g_io->io.get_executor());
}

#if defined(ASIO_HAS_CO_AWAIT)
// A coroutine that yields tasks_per_batch times, per batch: urt::yield() on
// urt::executor against what an Asio user writes to yield on a pool,
// co_await asio::post(asio::use_awaitable).
template <class Executor, class Yield>
void run_yield_loop(benchmark::State& state, const Executor& ex, Yield yield) {
  const auto batch_of_yields = [&] {
    g_batch.reset();
    asio::co_spawn(
        ex,
        [yield]() -> asio::awaitable<void, Executor> {
          for (std::uint64_t i = 0; i < tasks_per_batch; ++i) co_await yield();
          g_batch.finish();
        },
        asio::detached);
    g_batch.wait();
  };
  for (int i = 0; i < warmup_batches; ++i) batch_of_yields();
  for (auto _ : state) batch_of_yields();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(tasks_per_batch));
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_coroutine_yield(benchmark::State& state) {
  keep_only(executor_kind::urt_external);
  urt::runtime& rt = primed_runtime(g_external_rt, "0-1");
  run_yield_loop(state, rt.executor(spec), [] { return urt::yield(); });
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_thread_pool_coroutine_post(benchmark::State& state) {
  keep_only(executor_kind::asio_pool);
  if (!g_pool) g_pool = std::make_unique<asio::thread_pool>(2);
  using pool_executor = asio::thread_pool::executor_type;
  run_yield_loop(state, g_pool->get_executor(),
                 [] { return asio::post(asio::use_awaitable_t<pool_executor>{}); });
}
#endif

void external_spawn_io(benchmark::State& state, std::chrono::nanoseconds interval) {
  keep_only(executor_kind::urt_io);
  if (g_io_rt_interval != interval) {
    g_reads.reset();
    g_io_rt.reset();
    g_io_rt_interval = interval;
  }
  if (!g_io_rt) {
    urt_runtime(g_io_rt, "0-1", interval);
    prime_node_pool(*g_io_rt);
  }
  urt::runtime& rt = *g_io_rt;
  if (!g_reads) g_reads = std::make_unique<pending_reads>(rt);
  for (int i = 0; i < warmup_batches; ++i) external_batch(rt);
  const std::uint64_t completed_before = settled_completed(rt);
  const std::uint64_t polls_before = rt.stats().total().io_polls;
  const std::uint64_t allocs = timed_batches(state, [&] { external_batch(rt); });
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch);
  const auto tasks = static_cast<double>(static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch);
  state.counters["polls/task"] =
      benchmark::Counter(static_cast<double>(rt.stats().total().io_polls - polls_before) / tasks);
  report(state, allocs, "allocs/spawn");
}

// Three threads share two cores in the external benchmarks, so single runs
// scatter widely: each benchmark is repeated and the summary uses medians.
// The external pair is interleaved (urt, asio, urt, asio, ...) so that a
// slow stretch of the machine hits both executors alike (about 15 s in all).
constexpr int repetitions = 5;

void register_benchmarks() {
  benchmark::RegisterBenchmark("BM_urt_local_spawn", BM_urt_local_spawn)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->Repetitions(repetitions)
      ->DisplayAggregatesOnly(true);
  // One interleaved run of each, in this order, `repetitions` times.
  const auto once = [](const char* name, auto fn) {
    benchmark::RegisterBenchmark(name, fn)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (int r = 0; r < repetitions; ++r) {
    once("BM_urt_external_spawn", BM_urt_external_spawn);
    once("BM_asio_thread_pool_post", BM_asio_thread_pool_post);
    once("BM_urt_executor_post", BM_urt_executor_post);
    once("BM_asio_io_context_post", BM_asio_io_context_post);
    once("BM_urt_executor_defer_chain", BM_urt_executor_defer_chain);
    once("BM_asio_thread_pool_defer_chain", BM_asio_thread_pool_defer_chain);
    once("BM_asio_io_context_defer_chain", BM_asio_io_context_defer_chain);
#if defined(ASIO_HAS_CO_AWAIT)
    once("BM_urt_coroutine_yield", BM_urt_coroutine_yield);
    once("BM_asio_thread_pool_coroutine_post", BM_asio_thread_pool_coroutine_post);
#endif
    once("BM_urt_external_spawn_io_10us",
         [](benchmark::State& st) { external_spawn_io(st, std::chrono::microseconds{10}); });
    once("BM_urt_external_spawn_io_0",
         [](benchmark::State& st) { external_spawn_io(st, std::chrono::nanoseconds{0}); });
  }
}

// ---------------------------------------------------------------------------
// A console reporter that also keeps each benchmark's figures for the summary.

struct figures {
  double median_aggregate = 0;  // the library's median, when it repeated the benchmark
  bool has_median = false;
  std::vector<double> runs;     // items_per_second of each single run
  double allocs_per_task = 0;

  /// The median items_per_second: the library's, else of the single runs.
  [[nodiscard]] double items_per_second() const {
    if (has_median || runs.empty()) return median_aggregate;
    std::vector<double> v = runs;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
};

class capture_reporter : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) record(run);
    benchmark::ConsoleReporter::ReportRuns(runs);
  }

  [[nodiscard]] const figures* find(const std::string& function) const {
    const auto it = results_.find(function);
    return it == results_.end() ? nullptr : &it->second;
  }

 private:
  void record(const Run& run) {
    if (run.error_occurred) return;
    const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
    if (run.run_type == Run::RT_Aggregate && !median) return;
    figures& f = results_[run.run_name.function_name];
    if (const auto it = run.counters.find("items_per_second"); it != run.counters.end()) {
      if (median) {
        f.median_aggregate = it->second.value;
        f.has_median = true;
      } else {
        f.runs.push_back(it->second.value);
      }
    }
    for (const char* name : {"allocs/spawn", "allocs/post"}) {
      if (const auto it = run.counters.find(name); it != run.counters.end()) {
        f.allocs_per_task = std::max(f.allocs_per_task, it->second.value);  // the worst run
      }
    }
  }

  std::map<std::string, figures> results_;
};

std::string allocs_text(const figures* f) {
  if (f == nullptr) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", f->allocs_per_task);
  return text;
}

}  // namespace

// Idle wake through an executor (see the top of the file).
struct wake_figures {
  std::vector<std::int64_t> ns;
  [[nodiscard]] std::int64_t pct(double p) {
    std::sort(ns.begin(), ns.end());
    return ns.empty() ? 0 : ns[static_cast<std::size_t>(p * static_cast<double>(ns.size() - 1))];
  }
};

template <class Executor>
std::int64_t wake_sample(const Executor& ex) {
  std::atomic<std::int64_t> t1{0};
  std::this_thread::sleep_for(std::chrono::milliseconds{2});
  const auto t0 = std::chrono::steady_clock::now();
  asio::post(ex, [&t1] {
    t1.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);
    t1.notify_one();
  });
  while (t1.load(std::memory_order_acquire) == 0) t1.wait(0, std::memory_order_acquire);
  return t1.load(std::memory_order_relaxed) - t0.time_since_epoch().count();
}

void idle_wake(int samples) {
  keep_only(executor_kind::urt_local);  // tear the benchmarks' executors down
  g_local_rt.reset();
  urt::runtime rt([] {
    urt::runtime_options o;
    o.cpus = "0-1";
    o.idle_spin = std::chrono::microseconds{50};
    return o;
  }());
  const urt::executor ex = rt.executor({.priority = 90});
  asio::thread_pool pool(2);
  io_pool io;
  wake_figures u, p, c;
  for (int i = 0; i < samples; ++i) {
    u.ns.push_back(wake_sample(ex));
    p.ns.push_back(wake_sample(pool.get_executor()));
    c.ns.push_back(wake_sample(io.io.get_executor()));
  }
  pool.join();
  std::printf("idle wake through an executor (%d samples each, ns): p50 / p99\n", samples);
  const double up50 = static_cast<double>(u.pct(0.5));
  for (auto [name, f] : {std::pair<const char*, wake_figures*>{"urt::executor", &u},
                         {"asio::thread_pool", &p},
                         {"io_context x2", &c}}) {
    const std::int64_t p50 = f->pct(0.5);
    std::printf("  %-18s %8lld / %8lld   urt p50 / this p50 = %.2f\n", name,
                static_cast<long long>(p50), static_cast<long long>(f->pct(0.99)),
                p50 > 0 ? up50 / static_cast<double>(p50) : 0.0);
  }
}

int main(int argc, char** argv) {
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const auto options = static_cast<benchmark::ConsoleReporter::OutputOptions>(
      benchmark::ConsoleReporter::OO_Tabular |
      (isatty(STDOUT_FILENO) != 0 ? benchmark::ConsoleReporter::OO_Color : 0));
  capture_reporter reporter(options);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  g_local_rt.reset();
  g_external_rt.reset();
  if (g_pool) g_pool->join();
  g_pool.reset();
  benchmark::Shutdown();

  const figures* local = reporter.find("BM_urt_local_spawn");
  const figures* external = reporter.find("BM_urt_external_spawn");
  const figures* peer = reporter.find("BM_asio_thread_pool_post");
  std::cout.flush();
  if (external != nullptr && peer != nullptr && peer->items_per_second() > 0) {
    std::printf("external spawn throughput ratio urt/asio::thread_pool = %.2f\n",
                external->items_per_second() / peer->items_per_second());
    std::printf("  (median items_per_second over %zu interleaved runs each: urt external %.4g, "
                "asio::thread_pool %.4g)\n",
                external->runs.size(), external->items_per_second(), peer->items_per_second());
  } else {
    std::printf(
        "external spawn throughput ratio urt/asio::thread_pool = n/a "
        "(both benchmarks must run)\n");
  }
  std::printf("allocations per spawn in steady state: local=%s external=%s\n",
              allocs_text(local).c_str(), allocs_text(external).c_str());
  std::printf("allocations per post in steady state: asio::thread_pool=%s\n",
              allocs_text(peer).c_str());

  const figures* ex = reporter.find("BM_urt_executor_post");
  const figures* io = reporter.find("BM_asio_io_context_post");
  const auto ratio_text = [](const figures* a, const figures* b) {
    if (a == nullptr || b == nullptr || b->items_per_second() <= 0) return std::string("n/a");
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", a->items_per_second() / b->items_per_second());
    return std::string(text);
  };
  std::printf("urt::executor post throughput ratio: /asio::thread_pool = %s, /io_context x2 = %s "
              "(target >= 2 against asio::thread_pool)\n",
              ratio_text(ex, peer).c_str(), ratio_text(ex, io).c_str());
  std::printf("allocations per post in steady state: urt::executor=%s io_context=%s\n",
              allocs_text(ex).c_str(), allocs_text(io).c_str());
  const figures* dc = reporter.find("BM_urt_executor_defer_chain");
  std::printf("defer chain throughput ratio: urt::executor/asio::thread_pool = %s, "
              "/io_context x2 = %s\n",
              ratio_text(dc, reporter.find("BM_asio_thread_pool_defer_chain")).c_str(),
              ratio_text(dc, reporter.find("BM_asio_io_context_defer_chain")).c_str());
  std::printf("coroutine yield loop throughput ratio: urt::yield()/asio::thread_pool "
              "co_await asio::post = %s\n",
              ratio_text(reporter.find("BM_urt_coroutine_yield"),
                         reporter.find("BM_asio_thread_pool_coroutine_post"))
                  .c_str());
  const figures* io10 = reporter.find("BM_urt_external_spawn_io_10us");
  const figures* io0 = reporter.find("BM_urt_external_spawn_io_0");
  std::printf("external spawn with a socket read pending on each worker, throughput / without: "
              "io_poll_interval 10us = %s, 0 = %s\n",
              ratio_text(io10, external).c_str(), ratio_text(io0, external).c_str());
  if (const char* n = std::getenv("URT_WAKE_SAMPLES"); n == nullptr || std::atoi(n) > 0) {
    idle_wake(n == nullptr ? 300 : std::atoi(n));
  }
  return 0;
}
