// urt-spawn-bench: spawn throughput and heap allocations per spawn.
//
//   BM_urt_local_spawn        1 worker (cpus "0"): one driver task spawns
//                             tasks_per_batch empty tasks onto its own worker.
//   BM_urt_external_spawn     2 workers (cpus "0-1"): the benchmark thread
//                             spawns tasks_per_batch counting tasks.
//   BM_asio_thread_pool_post  the peer: asio::thread_pool(2), the benchmark
//                             thread posts tasks_per_batch counting callables.
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
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>

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
#include <vector>

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

enum class executor_kind { urt_local, urt_external, asio_pool };

void keep_only(executor_kind keep) {
  if (keep != executor_kind::urt_local) g_local_rt.reset();
  if (keep != executor_kind::urt_external) g_external_rt.reset();
  if (keep != executor_kind::asio_pool && g_pool) {
    g_pool->join();
    g_pool.reset();
  }
}

urt::runtime& urt_runtime(std::unique_ptr<urt::runtime>& slot, const char* cpus) {
  if (!slot) {
    urt::runtime_options opts;
    opts.cpus = cpus;
    opts.idle_spin = std::chrono::microseconds{50};
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
  std::uint64_t allocs = 0;
  for (auto _ : state) {
    const std::uint64_t a0 = allocations();
    local_batch(rt);
    allocs += allocations() - a0;
  }
  // Per batch: the driver and its tasks_per_batch children.
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * (tasks_per_batch + 1));
  report(state, allocs, "allocs/spawn");
}

void external_batch(urt::runtime& rt) {
  g_batch.reset();
  for (std::uint64_t i = 0; i < tasks_per_batch; ++i) {
    rt.spawn(spec, [] { g_batch.hit_shared(); });
  }
  g_batch.wait();
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_urt_external_spawn(benchmark::State& state) {
  keep_only(executor_kind::urt_external);
  urt::runtime& rt = primed_runtime(g_external_rt, "0-1");
  for (int i = 0; i < warmup_batches; ++i) external_batch(rt);
  const std::uint64_t completed_before = settled_completed(rt);
  std::uint64_t allocs = 0;
  for (auto _ : state) {
    const std::uint64_t a0 = allocations();
    external_batch(rt);
    allocs += allocations() - a0;
  }
  check_completed(state, rt, completed_before,
                  static_cast<std::uint64_t>(state.iterations()) * tasks_per_batch);
  report(state, allocs, "allocs/spawn");
}

void asio_batch(asio::thread_pool& pool) {
  g_batch.reset();
  for (std::uint64_t i = 0; i < tasks_per_batch; ++i) {
    asio::post(pool, [] { g_batch.hit_shared(); });
  }
  g_batch.wait();
}

// NOLINTNEXTLINE(readability-identifier-naming): Google Benchmark naming
void BM_asio_thread_pool_post(benchmark::State& state) {
  keep_only(executor_kind::asio_pool);
  if (!g_pool) g_pool = std::make_unique<asio::thread_pool>(2);
  asio::thread_pool& pool = *g_pool;
  for (int i = 0; i < warmup_batches; ++i) asio_batch(pool);
  std::uint64_t allocs = 0;
  for (auto _ : state) {
    const std::uint64_t a0 = allocations();
    asio_batch(pool);
    allocs += allocations() - a0;
  }
  report(state, allocs, "allocs/post");
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
  for (int r = 0; r < repetitions; ++r) {
    benchmark::RegisterBenchmark("BM_urt_external_spawn", BM_urt_external_spawn)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_asio_thread_pool_post", BM_asio_thread_pool_post)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
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
  return 0;
}
