// Stress: invariant 10 (every accepted task runs exactly once, or is handed
// back as cancelled and counted) while producers race stop() and tasks
// spawn children during draining or cancelling, on 1 to 4 flat workers and
// on the shapes with several LLCs, two NUMA nodes, SMT and 16 workers; and
// a load sized by URT_STRESS_TASKS (every priority, affinity, group and
// migration mode, throttled, half the tasks taking a concurrency ID in
// either cid mode) in which every task runs exactly once, no two tasks of a
// group running at once hold the same ID, and the counters reconcile.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "urt/urt.hpp"

#include "../topologies.hpp"

namespace {

struct ledger {
  explicit ledger(std::size_t capacity) : fate(capacity) {}
  std::atomic<std::size_t> next_id{0};
  std::vector<std::atomic<int>> fate;  // +1 per run, +1000 per drop unrun
  std::atomic<std::uint64_t> accepted_by_spawners{0};
};

// A callable that records whether it ran or was destroyed unrun.
class tracked {
 public:
  tracked(ledger& l, urt::runtime& rt, std::size_t id, int depth)
      : ledger_(&l), rt_(&rt), id_(id), depth_(depth) {}
  tracked(tracked&& o) noexcept
      : ledger_(std::exchange(o.ledger_, nullptr)), rt_(o.rt_), id_(o.id_), depth_(o.depth_) {}
  tracked& operator=(tracked&&) = delete;
  ~tracked() {
    if (ledger_ != nullptr && !ran_) ledger_->fate[id_].fetch_add(1000);
  }
  [[nodiscard]] bool armed() const noexcept { return ledger_ != nullptr; }
  void disarm() noexcept { ledger_ = nullptr; }
  void operator()() {
    ran_ = true;
    ledger_->fate[id_].fetch_add(1);
    if (depth_ > 0) spawn_child(*ledger_, *rt_, depth_ - 1);
  }

  static bool spawn_child(ledger& l, urt::runtime& rt, int depth) {
    const std::size_t id = l.next_id.fetch_add(1);
    if (id >= l.fate.size()) return false;
    const unsigned workers = static_cast<unsigned>(rt.worker_count());
    urt::task_spec spec{.priority = static_cast<int>(id % 100)};
    if (id % 3 == 0) spec.affinity = urt::worker_set{static_cast<unsigned>(id % workers)};
    tracked task(l, rt, id, depth);
    try {
      rt.spawn(spec, std::move(task));
    } catch (const urt::runtime_stopped&) {
      // Refused: spawn must have left the callable untouched (not moved from).
      CHECK(task.armed());
      task.disarm();
      l.fate[id].fetch_add(1000000);
      return false;
    }
    l.accepted_by_spawners.fetch_add(1);
    return true;
  }

 private:
  ledger* ledger_;
  urt::runtime* rt_;
  std::size_t id_;
  int depth_;
  bool ran_ = false;
};

}  // namespace

TEST_CASE("stress: exactly-once under racing producers, children and stop") {
  std::vector<urt_test::shape> shapes{urt_test::flat_n(1), urt_test::flat_n(2), urt_test::flat_n(3),
                                      urt_test::flat_n(4)};
  shapes.insert(shapes.end(), urt_test::live_shapes.begin() + 1, urt_test::live_shapes.end());
  std::mt19937 rng(12345);
  for (int round = 0; round < 100; ++round) {
    CAPTURE(round);
    // Each shape for two rounds in turn, one per stop mode; with the
    // migration mode (round % 3) every combination comes up every 48 rounds.
    const urt_test::shape& shape = shapes[static_cast<std::size_t>(round / 2) % shapes.size()];
    CAPTURE(shape);
    const auto mode = round % 2 == 0 ? urt::stop_mode::drain : urt::stop_mode::cancel;
    ledger l(200000);
    urt::runtime_options o;
    o.topology = urt_test::source_of(shape);
    o.idle_spin = std::chrono::microseconds{rng() % 2 == 0 ? 0 : 20};
    // Every migration mode preserves exactly-once execution.
    constexpr urt::migration_mode modes[] = {urt::migration_mode::push_ipi,
                                             urt::migration_mode::pull, urt::migration_mode::none};
    o.migration = modes[round % 3];
    CAPTURE(static_cast<int>(o.migration));
    std::size_t cancelled = 0;
    {
      urt::runtime rt(o);
      std::atomic<bool> go{false};
      std::vector<std::thread> producers;
      for (int p = 0; p < 3; ++p) {
        producers.emplace_back([&] {
          go.wait(false);
          while (tracked::spawn_child(l, rt, 2)) {
          }
        });
      }
      go = true;
      go.notify_all();
      // Let some work through, then stop while producers are still spawning.
      while (l.next_id.load() < 2000 + 1000 * static_cast<std::size_t>(round % 5)) {
        std::this_thread::yield();
      }
      cancelled = rt.stop(mode);
      for (auto& t : producers) t.join();

      const auto total = rt.stats().total();
      CHECK(total.accepted == l.accepted_by_spawners.load());
      CHECK(total.completed + total.cancelled == total.accepted);
      CHECK(total.cancelled == cancelled);
      if (mode == urt::stop_mode::drain) CHECK(cancelled == 0);
    }
    // Every id handed out is exactly one of: ran once, dropped unrun once,
    // or refused at spawn (never accepted).
    const std::size_t issued = std::min(l.next_id.load(), l.fate.size());
    std::size_t ran = 0, dropped = 0, refused = 0, wrong = 0;
    for (std::size_t id = 0; id < issued; ++id) {
      switch (l.fate[id].load()) {
        case 1: ++ran; break;
        case 1000: ++dropped; break;
        case 1000000: ++refused; break;
        default: ++wrong;
      }
    }
    CHECK(wrong == 0);
    CHECK(dropped == cancelled);
    CHECK(ran + dropped == l.accepted_by_spawners.load());
    CHECK(ran + dropped + refused == issued);
  }
}

// ------------------------------------------------------------------ sized load

namespace {

using namespace std::chrono_literals;

// Tasks of the sized load, all configurations together: URT_STRESS_TASKS,
// else a short run for CI. The long configuration is 10^7 (README).
std::uint64_t stress_tasks() {
  constexpr std::uint64_t ci_default = 150000;
  const char* text = std::getenv("URT_STRESS_TASKS");
  if (text == nullptr || *text == '\0') return ci_default;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text, &end, 10);
  REQUIRE_MESSAGE((*end == '\0' && n >= 6 && n <= 1000000000ull),
                  "URT_STRESS_TASKS must be a count of 6..10^9 (one task per configuration at "
                  "least), not ", text);
  return n;
}

constexpr std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One runtime's share of the load: task ids 0..count-1, each handed out
// once (by an external producer or by a running task) and run once.
struct load {
  static constexpr unsigned group_count = 3;  // the default group and two of its own

  load(urt::runtime& rt_, std::uint64_t count_, std::uint64_t seed_)
      : rt(rt_), count(count_), seed(seed_), runs(count_),
        workers(static_cast<unsigned>(rt_.worker_count())), cid_slots(group_count * workers) {}
  urt::runtime& rt;
  const std::uint64_t count;
  const std::uint64_t seed;
  std::vector<std::atomic<std::uint8_t>> runs;  // per id: times it ran
  const unsigned workers;
  std::vector<urt::group> groups;  // group_count of them
  std::atomic<std::uint64_t> next_id{0};
  std::atomic<std::uint64_t> ran{0};
  std::atomic<std::uint64_t> checksum{0};        // sum of mix(id) over runs
  std::atomic<std::uint64_t> outside_affinity{0};
  std::atomic<std::uint64_t> wrong_priority{0};
  // Concurrency IDs: one slot per (group, ID), holding id + 1 of the task
  // that runs under that ID of that group, 0 when none does.
  std::vector<std::atomic<std::uint64_t>> cid_slots;
  std::array<std::atomic<std::uint64_t>, group_count> cid_calls{};  // tasks that took one, per group
  std::atomic<std::uint64_t> cid_clashes{0};       // a slot already held, or taken over meanwhile
  std::atomic<std::uint64_t> cid_out_of_range{0};  // an ID not below the worker count
  std::atomic<std::uint64_t> cid_unstable{0};      // cid() changed within one task

  // The group index and whether task `id` takes a concurrency ID (half do),
  // functions of the id alone like the rest of its spec.
  [[nodiscard]] unsigned group_of(std::uint64_t id) const {
    return static_cast<unsigned>((mix(id ^ seed) >> 48) % group_count);
  }
  [[nodiscard]] bool takes_cid(std::uint64_t id) const { return (mix(id ^ seed) >> 60 & 1) != 0; }

  // The spec of task `id`, a function of the id alone, so that the task
  // can check where and how it runs: a priority 0..99; no affinity, one
  // worker, two workers or a contiguous range; one of the three groups.
  [[nodiscard]] urt::task_spec spec_of(std::uint64_t id) const {
    const std::uint64_t h = mix(id ^ seed);
    urt::task_spec spec{.priority = static_cast<int>(h % 100)};
    const auto w = [&](int shift) { return static_cast<unsigned>((h >> shift) % workers); };
    switch ((h >> 8) % 4) {
      case 0:
        break;
      case 1:
        spec.affinity = urt::worker_set{w(16)};
        break;
      case 2:
        spec.affinity = urt::worker_set{w(16), w(32)};
        break;
      default: {
        urt::worker_set range;
        const unsigned first = w(16);
        for (unsigned i = first; i < workers && i < first + 3; ++i) range.add(i);
        spec.affinity = range;
        break;
      }
    }
    spec.group = groups[group_of(id)];
    return spec;
  }

  // Hands out the next id and spawns its task; false once all are out.
  bool spawn_next(int depth) {
    const std::uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
    if (id >= count) return false;
    rt.spawn(spec_of(id), task{this, id, depth});
    return true;
  }

  struct task {
    load* l;
    std::uint64_t id;
    int depth;
    void operator()() const {
      const urt::task_spec spec = l->spec_of(id);
      if (spec.affinity && !spec.affinity->contains(urt::this_task::worker_id())) {
        l->outside_affinity.fetch_add(1, std::memory_order_relaxed);
      }
      if (urt::this_task::priority() != spec.priority) {
        l->wrong_priority.fetch_add(1, std::memory_order_relaxed);
      }
      // Its concurrency ID, held in the (group, ID) slot for the rest of
      // the task: no other running task of the group may hold the same.
      const unsigned g = l->group_of(id);
      const bool with_cid = l->takes_cid(id);
      unsigned cid = 0;
      std::atomic<std::uint64_t>* slot = nullptr;
      if (with_cid) {
        l->cid_calls[g].fetch_add(1, std::memory_order_relaxed);
        cid = urt::this_task::cid();
        if (cid >= l->workers) {
          l->cid_out_of_range.fetch_add(1, std::memory_order_relaxed);
        } else {
          slot = &l->cid_slots[g * l->workers + cid];
          if (slot->exchange(id + 1) != 0) l->cid_clashes.fetch_add(1, std::memory_order_relaxed);
        }
      }
      l->runs[id].fetch_add(1, std::memory_order_relaxed);
      l->ran.fetch_add(1, std::memory_order_relaxed);
      l->checksum.fetch_add(mix(id), std::memory_order_relaxed);
      // Tasks that spawn tasks: up to two children, one level less deep.
      if (depth > 0) {
        for (std::uint64_t k = 0; k < 1 + id % 2; ++k) {
          if (!l->spawn_next(depth - 1)) break;
        }
      }
      if (with_cid) {
        if (urt::this_task::cid() != cid) l->cid_unstable.fetch_add(1, std::memory_order_relaxed);
        if (slot != nullptr && slot->exchange(0) != id + 1) {
          l->cid_clashes.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  };
};

}  // namespace

TEST_CASE("stress: URT_STRESS_TASKS tasks from 4 threads and from tasks run exactly once, counters reconcile") {
  const std::uint64_t total = stress_tasks();
  MESSAGE("URT_STRESS_TASKS: ", total, " tasks");
  struct config {
    urt::migration_mode migration;
    urt_test::shape shape;
    urt::bandwidth_options bandwidth;  // throttling on, changed halfway
    urt::bandwidth_options halfway;
    urt::concurrency_id_mode cid_mode;
  };
  const urt::bandwidth_options deferred{
      .mode = urt::throttle_mode::deferred, .runtime = 300us, .period = 1ms};
  const urt::bandwidth_options strict{
      .mode = urt::throttle_mode::strict, .runtime = 700us, .period = 1ms};
  constexpr auto batched_scan = urt::concurrency_id_mode::batched_scan;
  constexpr auto ownership = urt::concurrency_id_mode::ownership;
  // Every migration mode with each cid mode.
  const config configs[] = {
      {urt::migration_mode::push_ipi, urt_test::two_numa, deferred, strict, batched_scan},
      {urt::migration_mode::pull, urt_test::several_llcs, strict, deferred, ownership},
      {urt::migration_mode::none, urt_test::smt, deferred, strict, batched_scan},
      {urt::migration_mode::push_ipi, urt_test::several_llcs, strict, deferred, ownership},
      {urt::migration_mode::pull, urt_test::smt, deferred, strict, batched_scan},
      {urt::migration_mode::none, urt_test::two_numa, strict, deferred, ownership},
  };
  constexpr std::uint64_t n_configs = std::size(configs);
  for (std::size_t c = 0; c < n_configs; ++c) {
    const config& cfg = configs[c];
    CAPTURE(cfg.shape);
    CAPTURE(static_cast<int>(cfg.migration));
    CAPTURE(static_cast<int>(cfg.cid_mode));
    const std::uint64_t count = total / n_configs + (c == 0 ? total % n_configs : 0);
    urt::runtime_options o = urt_test::synthetic_workers(cfg.shape);
    o.migration = cfg.migration;
    o.bandwidth = cfg.bandwidth;
    o.cid_mode = cfg.cid_mode;
    if (cfg.cid_mode == batched_scan) {
      // Compaction all the time: any cached ID may be taken back, and a
      // pass may start, at every scheduling point.
      o.cid_idle_threshold = 0ns;
      o.cid_scan_interval = 0ns;
      o.cid_scan_batch = 4;
    }
    urt::runtime rt(o);
    load l(rt, count, 0x5eed0000u + c);
    l.groups.push_back(urt::group{});
    l.groups.push_back(rt.make_group(urt::group_options{
        .name = "budgeted", .budget = urt::group_budget{.runtime = 200us, .period = 1ms}}));
    l.groups.push_back(rt.make_group(urt::group_options{.name = "unbudgeted"}));
    REQUIRE(l.groups.size() == load::group_count);

    std::atomic<bool> go{false};
    std::vector<std::thread> producers;
    for (int p = 0; p < 4; ++p) {
      producers.emplace_back([&l, &go, p] {
        go.wait(false);
        for (int i = 0; l.spawn_next((p + i) % 3); ++i) {
        }
      });
    }
    go = true;
    go.notify_all();
    // Halfway: new budgets for the runtime and both groups, while tasks run.
    while (l.next_id.load() < count / 2) std::this_thread::yield();
    rt.set_bandwidth(cfg.halfway);
    rt.set_bandwidth(l.groups[1], urt::group_budget{.runtime = 400us, .period = 2ms});
    rt.set_bandwidth(l.groups[2], urt::group_budget{.runtime = 900us, .period = 1ms});
    for (auto& t : producers) t.join();
    CHECK(rt.stop(urt::stop_mode::drain) == 0);

    // Every task exactly once: each id's count, the number and the checksum.
    std::uint64_t never = 0;
    std::uint64_t again = 0;
    std::uint64_t expected_sum = 0;
    for (std::uint64_t id = 0; id < count; ++id) {
      const int n = l.runs[id].load();
      never += n == 0 ? 1 : 0;
      again += n > 1 ? 1 : 0;
      expected_sum += mix(id);
    }
    CHECK(never == 0);
    CHECK(again == 0);
    CHECK(l.ran.load() == count);
    CHECK(l.checksum.load() == expected_sum);
    CHECK(l.outside_affinity.load() == 0);
    CHECK(l.wrong_priority.load() == 0);
    // Concurrency IDs: unique among the running tasks of each group, below
    // the worker count, stable within a task; every slot given back.
    CHECK(l.cid_clashes.load() == 0);
    CHECK(l.cid_out_of_range.load() == 0);
    CHECK(l.cid_unstable.load() == 0);
    std::uint64_t cid_tasks = 0;
    std::uint64_t cid_expected = 0;
    for (std::uint64_t id = 0; id < count; ++id) cid_expected += l.takes_cid(id) ? 1 : 0;
    for (const auto& calls : l.cid_calls) cid_tasks += calls.load();
    CHECK(cid_tasks == cid_expected);
    std::uint64_t held = 0;
    for (const auto& slot : l.cid_slots) held += slot.load() != 0 ? 1 : 0;
    CHECK(held == 0);

    // The counters reconcile: every accepted task completed, and every move
    // between queues was one push or one pull, counted once on each side.
    const urt::runtime_stats st = rt.stats();
    const urt::worker_stats sum = st.total();
    CHECK(sum.accepted == count);
    CHECK(sum.completed == count);
    CHECK(sum.cancelled == 0);
    CHECK(sum.exceptions == 0);
    CHECK(sum.migrated_in == sum.migrated_out);
    CHECK(sum.migrated_in == sum.pushes + sum.pulls);
    // push_ipi pulls at most one task per stuck hop taken over (the
    // fallback), per stuck worker's inbox taken in, per reschedule request
    // claimed, and per pull from a worker still stuck (no I/O here, so no
    // rescue pulls); none never pulls.
    if (cfg.migration == urt::migration_mode::push_ipi) {
      CHECK(sum.pulls <= sum.fallbacks + sum.take_overs + sum.resched_claims + sum.stuck_pulls);
    }
    if (cfg.migration == urt::migration_mode::none) CHECK(sum.pulls == 0);
    // Each group's IDs: every one taken went back (released by its worker or
    // reclaimed by compaction) or is still held, none at or above the
    // worker count; ownership holds none once the workers are idle and
    // never compacts.
    std::uint64_t allocated = 0;
    std::uint64_t steps = 0;
    for (std::size_t g = 0; g < l.groups.size(); ++g) {
      CAPTURE(g);
      const urt::group_stats gs = rt.stats(l.groups[g]);
      CHECK(gs.id == g);
      CHECK(gs.cids_allocated == gs.cids_released + gs.cids_reclaimed + gs.cids_in_use);
      CHECK(gs.cids_in_use <= l.workers);
      CHECK(gs.highest_cid < static_cast<int>(l.workers));
      CHECK(std::accumulate(gs.cid_step_ns.begin(), gs.cid_step_ns.end(), std::uint64_t{0}) ==
            gs.cid_steps);
      if (l.cid_calls[g].load() > 0) CHECK(gs.cids_allocated >= 1);
      if (cfg.cid_mode == ownership) {
        CHECK(gs.cids_in_use == 0);
        CHECK(gs.cids_reclaimed == 0);
        CHECK(gs.cid_steps == 0);
      }
      allocated += gs.cids_allocated;
      steps += gs.cid_steps;
    }
    MESSAGE(static_cast<int>(cfg.migration), "/cid ", static_cast<int>(cfg.cid_mode), ": ", count,
            " tasks, ", sum.pushes, " pushes, ", sum.pulls, " pulls, ", sum.throttle_events,
            " throttle events, ", rt.stats(l.groups[1]).throttle_events,
            " of the budgeted group, ", cid_tasks, " took an ID, ", allocated,
            " IDs allocated, ", steps, " compaction steps");
  }
}
