// urt-cpupri-bench: what a cpupri update and a cpupri find cost, per layout
// (runtime/cpupri.*, urt::cpupri_layout).
//
//   1. Single-threaded, on synthetic topologies of 64, 256 and 1024 workers:
//        update      one worker alternates its level between 10 and 20
//                    (each set() publishes the new level, retracts the old);
//        find all    find(90, no affinity) on a realistic state: most workers
//                    busy at random levels 1..80, 1/32 of them idle;
//        find 1/4    the same with an affinity of a random quarter of the
//                    workers;
//        find busy   the same busy levels, none idle, no affinity: the answer
//                    is a worker at the lowest busy level present;
//        find miss   every worker busy at 90..99: find(90) scans every lower
//                    level and returns none (the worst case).
//      `from` is a random worker (a list of 1024 drawn once per size), `last`
//      is none, `rotation` counts up. The states and lists come from fixed
//      seeds, so every layout answers the same queries; the bench checks
//      that the answers agree. Counted in user-mode instructions per
//      operation (perf_event_open, PERF_COUNT_HW_INSTRUCTIONS, the calling
//      thread only) when the machine has a PMU, else in ns per operation;
//      each figure is the median of 3 runs. The cost of the calling loop with
//      an out-of-line call (the same loop calling an empty function) is
//      printed: the bit layouts' update pays it (set() calls out of line);
//      per_llc_bytes' update is inline, one load and one byte store.
//      A fifth row, "bytes portable", is per_llc_bytes' find through its
//      portable scan (cpupri::find_portable(): what find() runs where SSE2
//      is missing, and under ThreadSanitizer), so that both scans are
//      measured in one run.
//      Under `valgrind --tool=callgrind` the bench counts instructions with
//      callgrind's client requests instead (exact, and usable in VMs without
//      a PMU); it then skips part 3, whose timings would be meaningless.
//   2. Placement as a whole: one external spawn's placement decision
//      (runtime/placement.hpp's place_on(), the code placement::place()
//      runs, with no caller worker and no CPU of the caller's, as on a
//      synthetic topology) on the same three sizes, every worker busy at
//      part 1's levels without the idle ones (1..80) with 1..4 tasks each:
//        spawn 90      priority 90, no affinity: cpupri finds a worker at
//                      the lowest busy level;
//        spawn 90,1/4  the same with part 1's quarter affinity;
//        spawn mixed   priorities 0..99, drawn once per query;
//        spawn 1       priority 1, which no worker is below: cpupri finds
//                      none and the least-loaded scan reads every worker's
//                      load (worker::load()'s formula over counters on two
//                      cache lines per worker, out of line, as in the
//                      runtime);
//        spawn 90 mate "spawn 90" from a caller on the CPU of an awake
//                      worker (one of part 1's list, busy at its level):
//                      placement looks among the other workers first, with
//                      that worker masked out of the scan
//                      (cpupri::find_other()), and takes it only when none
//                      is at its level or lower.
//      1024 placements per pass, each pass from the same rotation, so every
//      layout answers alike (checked); instructions and ns as in part 1.
//   3. Contention on this machine: one updater thread per worker, each pinned
//      to its own CPU, each alternating its own worker between 10 and 20 for
//      a fixed number of set() calls, started together. Two synthetic
//      topologies of two workers: two LLCs ("pack:1 [numa] l3:2 core:1 pu:1":
//      the per-LLC layouts share no cache line, global and per_numa share
//      every word, the case the kernel series measured) and one LLC
//      ("pack:1 [numa] l3:1 core:2 pu:1": per_llc shares its words as global
//      does, per_llc_bytes puts both bytes on one line: false sharing, but
//      plain stores). Median of the repetitions of (wall time from the start
//      to the last thread's end) / set() calls per thread; the same layout
//      run by one thread alone gives the uncontended cost.
//   4. Summary: per_llc_bytes' find and placement against global's per
//      size (instructions where counted, else ns), the targets of issue 18
//      (find at most global's in every variant; find busy at 1024 workers
//      under 500 ns), and its update cost under contention as a share of
//      global's, from this run's numbers, against the target (<= 5%;
//      the kernel's "[PATCH v2 4/4] sched/rt: Split cpupri_vec->cpumask to
//      per NUMA node to reduce contention" measured 0.49%). Also the share of
//      the contention excess alone (2-thread minus solo), and the floor the
//      first share has on this machine (per_llc_bytes solo / global 2-thread):
//      with two CPUs, global's contended update is only a few times its
//      uncontended one, so a per-update share of 5% may be out of reach.
//   5. Reschedule requests (runtime/resched.*), what a scheduling point
//      pays while a request it cannot claim is raised, on part 1's sizes:
//        below top     one request at priority 1; claim_above(50) from
//                      part 1's random workers: the summary word says
//                      nothing is above 50, no byte is read;
//        stale top     a request at 90 raised and served while one at 1
//                      stays: the summary's top still says 90, so the next
//                      claim_above(50) scans every byte, finds nothing and
//                      lowers top to 1. Per round of the three calls
//                      (request, the claim that serves it, the scan);
//        after the scan  claim_above(50) again, per claim: the scan lowered
//                      top, so it is the fast path again.
//      Instructions or ns per call or round, as in part 1; every answer
//      must be as described.
//   Each part says how much CPU time other processes (and the hypervisor's
//   steal) took meanwhile, from /proc/stat, and flags it above 10%.
//
// Options: --ops=N (set() calls per thread in part 3, default 5000000),
// --reps=N (repetitions in part 3, default 5).
//
// DESIGN.md ("How results are measured"): every figure is a ratio against
// the global layout measured in this same run, or a count.

#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "cpupri.hpp"
#include "instr_measure.hpp"
#include "placement.hpp"
#include "resched.hpp"
#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/topology.hpp"

namespace {

using namespace urt_bench;
using urt::cpupri_layout;
using urt::worker_place;
using urt::worker_set;
using urt::detail::cpupri;
using urt::detail::placement_rotation;

constexpr cpupri_layout all_layouts[] = {cpupri_layout::global, cpupri_layout::per_numa,
                                         cpupri_layout::per_llc, cpupri_layout::per_llc_bytes};
constexpr std::size_t layout_count = std::size(all_layouts);

const char* name_of(cpupri_layout l) {
  switch (l) {
    case cpupri_layout::global:
      return "global";
    case cpupri_layout::per_numa:
      return "per_numa";
    case cpupri_layout::per_llc:
      return "per_llc";
    case cpupri_layout::per_llc_bytes:
      return "per_llc_bytes";
  }
  return "?";
}

// Part 1's rows: the four layouts, and per_llc_bytes' find through its
// portable scan (cpupri::find_portable(), what find() runs without SSE2;
// its update is per_llc_bytes' own).
struct variant {
  cpupri_layout layout;
  bool portable;
  const char* name;
};
constexpr variant variants[] = {{cpupri_layout::global, false, "global"},
                                {cpupri_layout::per_numa, false, "per_numa"},
                                {cpupri_layout::per_llc, false, "per_llc"},
                                {cpupri_layout::per_llc_bytes, false, "per_llc_bytes"},
                                {cpupri_layout::per_llc_bytes, true, "bytes portable"}};
constexpr std::size_t bytes_variant = 3;  // per_llc_bytes' row

// Repetitions of each single-threaded measurement (callgrind's counts are exact).
unsigned single_reps() { return g_mode == count_mode::callgrind ? 1 : 3; }

// ---------------------------------------------------------------------------
// Part 1: single-threaded costs on synthetic topologies.

std::vector<worker_place> places_of(const std::string& synthetic) {
  urt::topology t(urt::topology_options{.source = urt::topology_source::synthetic(synthetic)});
  return {t.workers().begin(), t.workers().end()};
}

struct size_case {
  const char* synthetic;
  unsigned workers;
};
constexpr size_case sizes[] = {
    {"pack:2 [numa] l3:4 core:4 pu:2", 64},
    {"pack:2 [numa] l3:8 core:8 pu:2", 256},
    {"pack:4 [numa] l3:8 core:16 pu:2", 1024},
};

constexpr int find_priority = 90;
constexpr std::size_t from_list = 1024;  // random `from` workers per size

enum find_kind { find_all, find_quarter, find_busy, find_miss, find_kinds };
constexpr const char* find_names[find_kinds] = {"find all", "find 1/4", "find busy", "find miss"};

// One size's workload, the same for every layout.
struct workload {
  std::vector<worker_place> places;
  unsigned llcs = 0;
  unsigned numas = 0;
  std::vector<int> busy_levels;  // realistic state (idle or 1..80)
  std::vector<int> sat_levels;   // the same without the idle ones (all 1..80)
  std::vector<int> miss_levels;  // every worker at 90..99
  unsigned idle = 0;
  worker_set quarter;
  std::vector<unsigned> froms;
};

workload make_workload(const size_case& sc) {
  workload w;
  w.places = places_of(sc.synthetic);
  const auto n = static_cast<unsigned>(w.places.size());
  for (const worker_place& p : w.places) {
    w.llcs = std::max(w.llcs, p.llc + 1);
    w.numas = std::max(w.numas, p.numa + 1);
  }
  std::mt19937_64 rng(0x5eed0000u + n);
  std::uniform_int_distribution<int> busy(1, 80);
  std::uniform_int_distribution<int> high(find_priority, urt::priority_max);
  std::uniform_int_distribution<unsigned> any(0, n - 1);
  w.busy_levels.resize(n);
  w.miss_levels.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    w.busy_levels[i] = busy(rng);
    w.miss_levels[i] = high(rng);
  }
  std::vector<unsigned> ids(n);
  std::iota(ids.begin(), ids.end(), 0u);
  std::shuffle(ids.begin(), ids.end(), rng);
  w.sat_levels = w.busy_levels;
  w.idle = std::max(2u, n / 32);
  for (unsigned i = 0; i < w.idle; ++i) w.busy_levels[ids[i]] = cpupri::level_idle;
  std::shuffle(ids.begin(), ids.end(), rng);
  for (unsigned i = 0; i < n / 4; ++i) w.quarter.add(ids[i]);
  w.froms.resize(from_list);
  for (unsigned& f : w.froms) f = any(rng);
  return w;
}

// Same signature as cpupri::set, does nothing: the harness baseline.
[[gnu::noinline]] void empty_set(cpupri* cp, unsigned worker, int level) noexcept {
  asm volatile("" : : "r"(cp), "r"(worker), "r"(level) : "memory");
}

void apply(cpupri& cp, const std::vector<int>& levels) {
  for (unsigned i = 0; i < levels.size(); ++i) cp.set(i, levels[i]);
}

struct find_stats {
  std::uint64_t checksum = 0;  // over one pass of the from list
  unsigned none = 0;
  double level_sum = 0;  // level of the answers found
};

unsigned find_with(const cpupri& cp, bool portable, const worker_set* affinity, unsigned from,
                   unsigned rotation) {
  return portable ? cp.find_portable(find_priority, affinity, from, cpupri::none, rotation)
                  : cp.find(find_priority, affinity, from, cpupri::none, rotation);
}

find_stats one_pass(const cpupri& cp, bool portable, const worker_set* affinity,
                    const workload& w) {
  find_stats st;
  std::uint64_t rot = 0;
  for (unsigned from : w.froms) {
    const unsigned r = find_with(cp, portable, affinity, from, static_cast<unsigned>(rot++));
    st.checksum = st.checksum * 1000003u + r;
    if (r == cpupri::none) {
      ++st.none;
    } else {
      st.level_sum += cp.level(r);
    }
  }
  return st;
}

struct layout_result {
  sample update;
  sample find[find_kinds];
  find_stats stats[find_kinds];
};

layout_result run_single(const variant& v, const workload& w, const perf_counter* counter) {
  layout_result out;
  const bool grind = g_mode == count_mode::callgrind;
  cpupri cp(v.layout, w.places);
  const auto n = static_cast<unsigned>(w.places.size());
  for (unsigned i = 0; i < n; ++i) cp.set(i, cpupri::level_idle);

  // (a) update: a worker in the middle alternates 10 <-> 20, two set() per
  // loop iteration so that the loop's own instructions are few.
  {
    const unsigned me = n / 2 + 1;
    const std::uint64_t ops = grind ? 20'000 : 1'000'000;
    for (int i = 0; i < 1000; ++i) cp.set(me, (i & 1) != 0 ? 20 : 10);
    cp.set(me, 20);
    out.update = measure_median(
        single_reps(), ops,
        [&] {
          for (std::uint64_t i = 0; i < ops; i += 2) {
            cp.set(me, 10);
            cp.set(me, 20);
          }
        },
        counter);
    cp.set(me, cpupri::level_idle);
  }

  // (b) find, on each state in turn (see find_kind).
  for (int kind = 0; kind < find_kinds; ++kind) {
    apply(cp, kind == find_miss ? w.miss_levels : kind == find_busy ? w.sat_levels : w.busy_levels);
    const worker_set* affinity = kind == find_quarter ? &w.quarter : nullptr;
    out.stats[kind] = one_pass(cp, v.portable, affinity, w);  // also the warm-up
    // Whole passes over the from list (so that every layout averages over the
    // same queries): as many as fit in about 30 ms, 1..100 (1e5 finds).
    std::uint64_t passes = 1;
    if (!grind) {
      const auto t0 = steady::now();
      keep(one_pass(cp, v.portable, affinity, w).checksum);
      const double pass_s = seconds_since(t0);
      passes = static_cast<std::uint64_t>(std::clamp(0.03 / pass_s, 1.0, 100.0));
    }
    const std::uint64_t ops = passes * w.froms.size();
    out.find[kind] = measure_median(
        single_reps(), ops,
        [&] {
          std::uint64_t rot = 0;
          for (std::uint64_t p = 0; p < passes; ++p) {
            for (unsigned from : w.froms) {
              const unsigned r =
                  find_with(cp, v.portable, affinity, from, static_cast<unsigned>(rot++));
              keep(r);
            }
          }
        },
        counter);
  }
  return out;
}

void print_cell(double v, double base) {
  if (std::isnan(v)) {
    std::printf(" %10s %6s", "-", "");
  } else {
    std::printf(" %10.1f %6.3f", v, v / base);
  }
}

// One table row: a name and one sample per column.
struct table_row {
  const char* name;
  std::vector<sample> cells;
};

// One table: rows size x variant, each cell with its ratio to the first
// row (the global layout) of the same size.
void print_table(const char* unit, const std::vector<const char*>& columns,
                 const std::vector<std::vector<table_row>>& rows, bool instr) {
  std::printf("%-7s %-14s", "workers", "layout");
  for (const char* c : columns) std::printf(" %10s %6s", c, "/glob");
  std::printf("   (%s)\n", unit);
  for (std::size_t s = 0; s < rows.size(); ++s) {
    const table_row& g = rows[s][0];
    for (const table_row& r : rows[s]) {
      std::printf("%-7u %-14s", sizes[s].workers, r.name);
      for (std::size_t k = 0; k < r.cells.size(); ++k) {
        const sample& x = r.cells[k];
        const sample& base = g.cells[k];
        print_cell(instr ? x.instr : x.ns, instr ? base.instr : base.ns);
      }
      std::printf("\n");
    }
  }
}

std::vector<table_row> rows_of(const std::vector<layout_result>& results) {
  std::vector<table_row> out;
  for (std::size_t v = 0; v < results.size(); ++v) {
    table_row row{variants[v].name, {results[v].update}};
    for (const sample& f : results[v].find) row.cells.push_back(f);
    out.push_back(row);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Part 2: one external spawn's placement decision on a synthetic runtime.

// A synthetic runtime's workers as placement sees them: per worker the
// counters worker::load() reads, on two cache lines as in the runtime (the
// worker's counters, its queue's migration counts), read by an out-of-line
// load() with worker::load()'s formula.
class synthetic_workers {
 public:
  explicit synthetic_workers(const std::vector<std::uint64_t>& loads)
      : n_(loads.size()),
        counters_(std::make_unique<counters[]>(n_)),
        queues_(std::make_unique<queue_counts[]>(n_)) {
    for (std::size_t w = 0; w < n_; ++w) {
      counters_[w].accepted_remote.store(loads[w] + 100, std::memory_order_relaxed);
      counters_[w].accepted_local.store(50, std::memory_order_relaxed);
      counters_[w].finished_hint.store(140, std::memory_order_relaxed);
      queues_[w].migrated_in.store(3, std::memory_order_relaxed);
      queues_[w].migrated_out.store(13, std::memory_order_relaxed);
    }
  }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[gnu::noinline]] std::uint64_t load(unsigned w) const noexcept {
    // Relaxed, as in worker::load(): a hint.
    const std::uint64_t accepted = counters_[w].accepted_remote.load(std::memory_order_relaxed) +
                                   counters_[w].accepted_local.load(std::memory_order_relaxed) +
                                   queues_[w].migrated_in.load(std::memory_order_relaxed);
    const std::uint64_t finished = counters_[w].finished_hint.load(std::memory_order_relaxed) +
                                   queues_[w].migrated_out.load(std::memory_order_relaxed);
    return accepted > finished ? accepted - finished : 0;
  }
  // Read only with a caller's CPU ("spawn 90 mate"): every worker awake.
  [[nodiscard]] bool parking(unsigned) const noexcept { return false; }
  [[nodiscard]] bool asleep(unsigned) const noexcept { return false; }

 private:
  struct alignas(64) counters {
    std::atomic<std::uint64_t> accepted_remote{0};
    std::atomic<std::uint64_t> accepted_local{0};
    std::atomic<std::uint64_t> finished_hint{0};
  };
  struct alignas(64) queue_counts {
    std::atomic<std::uint64_t> migrated_in{0};
    std::atomic<std::uint64_t> migrated_out{0};
  };
  std::size_t n_;
  std::unique_ptr<counters[]> counters_;
  std::unique_ptr<queue_counts[]> queues_;
};

enum spawn_kind { spawn_above, spawn_quarter, spawn_mixed, spawn_below, spawn_mate, spawn_kinds };
constexpr const char* spawn_names[spawn_kinds] = {"spawn 90", "spawn 90,1/4", "spawn mixed",
                                                  "spawn 1", "spawn 90 mate"};

// Part 2's state of one size: every worker busy (part 1's levels without
// the idle ones, 1..80), each with 1..4 tasks accepted and unfinished.
struct spawn_workload {
  std::vector<std::uint64_t> loads;
  std::vector<int> mixed;  // the priorities of "spawn mixed", one per query
};

spawn_workload make_spawn_workload(const workload& w) {
  spawn_workload sw;
  const auto n = static_cast<unsigned>(w.places.size());
  std::mt19937_64 rng(0x5a4e0000u + n);
  std::uniform_int_distribution<std::uint64_t> load(1, 4);
  std::uniform_int_distribution<int> prio(urt::priority_normal, urt::priority_max);
  for (unsigned i = 0; i < n; ++i) sw.loads.push_back(load(rng));
  for (std::size_t i = 0; i < from_list; ++i) sw.mixed.push_back(prio(rng));
  return sw;
}

struct spawn_result {
  sample cost[spawn_kinds];
  std::uint64_t checksum[spawn_kinds] = {};
  unsigned remote[spawn_kinds] = {};  // placements that fell back to the least-loaded scan
};

spawn_result run_spawns(cpupri_layout layout, const workload& w, const spawn_workload& sw,
                        const perf_counter* counter) {
  spawn_result out;
  const bool grind = g_mode == count_mode::callgrind;
  cpupri cp(layout, w.places);
  apply(cp, w.sat_levels);
  const synthetic_workers workers(sw.loads);
  const std::span<const unsigned> no_pus;  // a synthetic topology: no CPU of the caller's
  // "spawn 90 mate": PU i hosts worker i, and the caller runs on the PU of
  // a worker from part 1's list (awake, busy): the others are searched
  // without it first (cpupri::find_other()).
  std::vector<unsigned> pus(w.places.size());
  for (unsigned i = 0; i < pus.size(); ++i) pus[i] = i;
  // `mate`: std::true_type for "spawn 90 mate"; the other kinds' loops pass
  // the empty PU map and no caller's CPU, as before that row existed (their
  // counts still moved by 18-42 instructions with this lambda: bench/README,
  // "urt-peers (a): an external spawn's placement, one search instead of two").
  const auto run_kind = [&](int kind, auto mate) {
    const worker_set* affinity = kind == spawn_quarter ? &w.quarter : nullptr;
    const auto priority_of = [&](std::size_t i) {
      return kind == spawn_mixed ? sw.mixed[i] : kind == spawn_below ? 1 : find_priority;
    };
    // Every pass starts from the same rotation, so that all layouts answer
    // the same queries alike.
    const auto pass = [&](std::uint64_t* checksum, unsigned* remote) {
      placement_rotation rot;
      for (std::size_t i = 0; i < from_list; ++i) {
        const urt::priority_t p = priority_of(i);
        unsigned r = 0;
        if constexpr (decltype(mate)::value) {
          r = urt::detail::place_on(cp, workers, pus, p, affinity, cpupri::none,
                                    static_cast<int>(w.froms[i]), rot);
        } else {
          r = urt::detail::place_on(cp, workers, no_pus, p, affinity, cpupri::none, -1, rot);
        }
        if (checksum != nullptr) {
          *checksum = *checksum * 1000003u + r;
          if (cp.level(r) >= p) ++*remote;  // not below the task: the fallback's choice
        } else {
          keep(r);
        }
      }
    };
    pass(&out.checksum[kind], &out.remote[kind]);  // also the warm-up
    std::uint64_t passes = 1;
    if (!grind) {
      const auto t0 = steady::now();
      pass(nullptr, nullptr);
      passes = static_cast<std::uint64_t>(std::clamp(0.03 / seconds_since(t0), 1.0, 100.0));
    }
    out.cost[kind] = measure_median(
        single_reps(), passes * from_list,
        [&] {
          for (std::uint64_t k = 0; k < passes; ++k) pass(nullptr, nullptr);
        },
        counter);
  };
  for (int kind = 0; kind < spawn_kinds; ++kind) {
    if (kind == spawn_mate) {
      run_kind(kind, std::true_type{});
    } else {
      run_kind(kind, std::false_type{});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Part 3: contention between updater threads pinned to distinct CPUs.

bool pin_to(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

std::vector<unsigned> allowed_cpus() {
  std::vector<unsigned> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// How busy the machine was outside this process: /proc/stat's busy and steal
// time against this process's own CPU time (getrusage), over an interval.
struct machine_load {
  double busy_s = 0;   // all CPUs: user + nice + system + irq + softirq
  double steal_s = 0;  // time the hypervisor gave to others
  double own_s = 0;    // this process: user + system
  steady::time_point at = steady::now();

  static machine_load now() {
    machine_load m;
    std::ifstream in("/proc/stat");
    std::string cpu;
    double v[8] = {};
    in >> cpu;
    for (double& x : v) in >> x;
    const auto tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    m.busy_s = (v[0] + v[1] + v[2] + v[5] + v[6]) / tick;
    m.steal_s = v[7] / tick;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    m.own_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    return m;
  }
};

unsigned online_cpus() {
  return static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// Share of the machine's CPU time (0..1) that other processes, and the
// hypervisor's steal, took between a and b.
double other_share(const machine_load& a, const machine_load& b) {
  const double wall = std::chrono::duration<double>(b.at - a.at).count() * online_cpus();
  if (wall <= 0) return 0;
  const double other = std::max(0.0, (b.busy_s - a.busy_s) - (b.own_s - a.own_s));
  return (other + (b.steal_s - a.steal_s)) / wall;
}

// "other processes X% of N CPUs, steal Y%" between a and b.
std::string load_between(const machine_load& a, const machine_load& b) {
  const unsigned cpus = online_cpus();
  const double wall = std::chrono::duration<double>(b.at - a.at).count() * cpus;
  if (wall <= 0) return "?";
  const double other = std::max(0.0, (b.busy_s - a.busy_s) - (b.own_s - a.own_s));
  char buf[128];
  std::snprintf(buf, sizeof buf, "other processes used %.0f%% of %u CPUs, steal %.0f%%",
                100.0 * other / wall, cpus, 100.0 * (b.steal_s - a.steal_s) / wall);
  return buf;
}

// Above this share of the machine taken by others, timings are flagged.
constexpr double disturbed_share = 0.10;

// load_between(a, b), flagged " [DISTURBED]" above disturbed_share.
std::string meanwhile(const machine_load& a, const machine_load& b) {
  return load_between(a, b) + (other_share(a, b) > disturbed_share ? " [DISTURBED]" : "");
}

struct thread_out {
  steady::time_point start;
  steady::time_point end;
  double instr = std::nan("");
  bool pinned = false;
};

// `threads` updaters, thread i on cpus[i] owning worker i; returns
// (wall time from the first start to the last end) / ops per thread, in ns.
double run_updaters(cpupri& cp, unsigned threads, const std::vector<unsigned>& cpus,
                    std::uint64_t ops, double* instr_per_op, bool* pinned_all) {
  std::atomic<unsigned> ready{0};
  std::vector<thread_out> outs(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      thread_out& o = outs[t];
      o.pinned = pin_to(cpus[t]);
      perf_counter counter;  // this thread's own
      for (int i = 0; i < 1000; ++i) cp.set(t, (i & 1) != 0 ? 20 : 10);
      cp.set(t, 20);
      // Start together: a spin barrier among the updaters only (the main
      // thread sleeps in join, so it takes no CPU from them).
      ready.fetch_add(1, std::memory_order_acq_rel);
      while (ready.load(std::memory_order_acquire) < threads) cpu_relax();
      const std::uint64_t i0 = counter.ok() ? counter.value() : 0;
      o.start = steady::now();
      for (std::uint64_t i = 0; i < ops; i += 2) {
        cp.set(t, 10);
        cp.set(t, 20);
      }
      o.end = steady::now();
      if (counter.ok()) {
        o.instr = static_cast<double>(counter.value() - i0) / static_cast<double>(ops);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  steady::time_point first = outs[0].start;
  steady::time_point last = outs[0].end;
  double instr = 0;
  bool pinned = true;
  for (const thread_out& o : outs) {
    first = std::min(first, o.start);
    last = std::max(last, o.end);
    instr += o.instr / threads;
    pinned = pinned && o.pinned;
  }
  *instr_per_op = instr;
  *pinned_all = pinned;
  return std::chrono::duration<double, std::nano>(last - first).count() / static_cast<double>(ops);
}

struct contention_result {
  double solo = 0;  // ns/update, one thread alone (median)
  double duo = 0;   // ns/update, both threads (median)
  double duo_min = 0;
  double duo_max = 0;
  double instr = std::nan("");  // per update, in the contended run (median)
};

struct contention_case {
  const char* label;
  const char* synthetic;
};
constexpr contention_case contention_cases[] = {
    {"two LLCs", "pack:1 [numa] l3:2 core:1 pu:1"},
    {"one LLC", "pack:1 [numa] l3:1 core:2 pu:1"},
};

std::vector<contention_result> run_contention(const contention_case& cc,
                                              const std::vector<unsigned>& cpus, std::uint64_t ops,
                                              unsigned reps, bool* pinned_all) {
  const std::vector<worker_place> places = places_of(cc.synthetic);
  std::vector<contention_result> out;
  *pinned_all = true;
  for (cpupri_layout layout : all_layouts) {
    cpupri cp(layout, places);
    for (unsigned i = 0; i < places.size(); ++i) cp.set(i, cpupri::level_idle);
    std::vector<double> solo;
    std::vector<double> duo;
    std::vector<double> instr;
    for (unsigned r = 0; r < reps; ++r) {
      double ins = 0;
      bool pinned = false;
      solo.push_back(run_updaters(cp, 1, cpus, ops, &ins, &pinned));
      *pinned_all = *pinned_all && pinned;
      duo.push_back(run_updaters(cp, 2, cpus, ops, &ins, &pinned));
      *pinned_all = *pinned_all && pinned;
      instr.push_back(ins);
    }
    contention_result res;
    res.solo = median(solo);
    res.duo = median(duo);
    res.duo_min = *std::min_element(duo.begin(), duo.end());
    res.duo_max = *std::max_element(duo.begin(), duo.end());
    res.instr = median(instr);
    out.push_back(res);
  }
  return out;
}

std::uint64_t parse_count(const char* arg, std::string_view key, std::uint64_t fallback) {
  const std::string_view a(arg);
  if (a.rfind(key, 0) != 0) return fallback;
  const std::uint64_t v = std::strtoull(arg + key.size(), nullptr, 10);
  return v > 0 ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ops = 5'000'000;
  std::uint64_t reps = 5;
  for (int i = 1; i < argc; ++i) {
    ops = parse_count(argv[i], "--ops=", ops);
    reps = parse_count(argv[i], "--reps=", reps);
  }
  ops += ops % 2;  // the loops do two set() per iteration
  const auto t_start = steady::now();

  std::printf("urt-cpupri-bench: cpupri update and find cost per layout\n\n");
  perf_counter counter;
  if (under_callgrind()) {
    g_mode = count_mode::callgrind;
    std::printf(
        "instruction counts: callgrind client requests (exact guest instructions; "
        "the ns figures are valgrind's, not the machine's)\n");
  } else if (counter.ok()) {
    g_mode = count_mode::perf;
    std::printf(
        "instruction counts: perf_event_open, user-mode instructions of the "
        "measuring thread\n");
  } else {
    g_mode = count_mode::none;
    std::printf(
        "instruction counts UNAVAILABLE on this machine: %s.\n"
        "Reporting ns per operation instead. For exact instruction counts run it "
        "under callgrind:\n  valgrind --tool=callgrind %s\n",
        why_no_counter(counter.error()).c_str(), argv[0]);
  }
  const bool have_instr = g_mode != count_mode::none;
  const perf_counter* main_counter = g_mode == count_mode::perf ? &counter : nullptr;

  // ---- Part 1.
  std::printf("\n== 1. Single-threaded, synthetic topologies ==\n");
  std::printf(
      "update: one worker alternates its level 10 <-> 20 (one set() per change)\n"
      "find: priority %d, from = random worker, last = none; state: busy at 1..80, "
      "1/32 idle\n  'find 1/4' = affinity of a random quarter of the workers; "
      "'find busy' = the same levels, none idle;\n  'find miss' = every worker at "
      "90..99, answer none\n",
      find_priority);
  {
    // What the calling loop with an out-of-line call costs per set(): the
    // same loop calling an empty function of set()'s signature. The bit
    // layouts' update includes it; per_llc_bytes' update is inline.
    const std::uint64_t base_ops = g_mode == count_mode::callgrind ? 20'000 : 1'000'000;
    cpupri* none_cp = nullptr;
    keep(none_cp);
    const sample base = measure_median(
        single_reps(), base_ops,
        [&] {
          for (std::uint64_t i = 0; i < base_ops; i += 2) {
            empty_set(none_cp, 1, 10);
            empty_set(none_cp, 1, 20);
          }
        },
        main_counter);
    if (have_instr) {
      std::printf(
          "  calling loop with an out-of-line call (in the bit layouts' 'update'; "
          "per_llc_bytes' set() is inline): %.1f instructions, %.2f ns per set()\n",
          base.instr, base.ns);
    } else {
      std::printf(
          "  calling loop with an out-of-line call (in the bit layouts' 'update'; "
          "per_llc_bytes' set() is inline): %.2f ns per set()\n",
          base.ns);
    }
  }
  std::vector<std::vector<layout_result>> results;
  bool answers_agree = true;
  const machine_load part1_before = machine_load::now();
  for (const size_case& sc : sizes) {
    const workload w = make_workload(sc);
    std::vector<layout_result> row;
    for (const variant& v : variants) row.push_back(run_single(v, w, main_counter));
    for (const layout_result& r : row) {
      for (int k = 0; k < find_kinds; ++k) {
        answers_agree = answers_agree && r.stats[k].checksum == row[0].stats[k].checksum;
      }
    }
    std::printf(
        "  %4u workers \"%s\": %u NUMA nodes, %u LLCs of %u, %u idle; answers over "
        "%zu queries:",
        sc.workers, sc.synthetic, w.numas, w.llcs, sc.workers / w.llcs, w.idle, w.froms.size());
    for (int k = 0; k < find_kinds; ++k) {
      const find_stats& st = row[0].stats[k];
      const unsigned found = static_cast<unsigned>(w.froms.size()) - st.none;
      std::printf(" %s: %u none", find_names[k], st.none);
      if (found > 0) std::printf(", mean level %.2f", st.level_sum / found);
      std::printf(";");
    }
    std::printf("\n");
    results.push_back(std::move(row));
  }
  const machine_load part1_after = machine_load::now();
  std::printf("  answers identical across layouts: %s; meanwhile %s\n\n",
              answers_agree ? "yes" : "NO", meanwhile(part1_before, part1_after).c_str());
  std::vector<std::vector<table_row>> part1_rows;
  for (const auto& r : results) part1_rows.push_back(rows_of(r));
  std::vector<const char*> part1_columns{"update"};
  for (const char* f : find_names) part1_columns.push_back(f);
  const char* ns_unit =
      g_mode == count_mode::callgrind ? "ns per operation, under valgrind" : "ns per operation";
  if (have_instr) {
    print_table("instructions per operation", part1_columns, part1_rows, true);
    std::printf("\n");
  }
  print_table(ns_unit, part1_columns, part1_rows, false);

  // ---- Part 2.
  std::printf(
      "\n== 2. Placement: one external spawn's decision (placement's place_on, no caller "
      "worker) ==\n"
      "every worker busy at 1..80 (part 1's levels, none idle), 1..4 tasks each; 'spawn 90' "
      "= priority 90;\n  'spawn 90,1/4' = the same with part 1's quarter affinity; "
      "'spawn mixed' = priorities 0..99 drawn\n  per query; 'spawn 1' = priority 1, "
      "which no worker is below: cpupri finds none and the\n  least-loaded scan reads every "
      "worker's load; 'spawn 90 mate' = 'spawn 90' from the CPU of an\n  awake worker: the "
      "others searched first, that worker masked out\n");
  std::vector<std::vector<spawn_result>> spawns;
  bool spawns_agree = true;
  const machine_load part2_before = machine_load::now();
  for (const size_case& sc : sizes) {
    const workload w = make_workload(sc);
    const spawn_workload sw = make_spawn_workload(w);
    std::vector<spawn_result> row;
    for (cpupri_layout layout : all_layouts) row.push_back(run_spawns(layout, w, sw, main_counter));
    for (const spawn_result& r : row) {
      for (int k = 0; k < spawn_kinds; ++k) {
        spawns_agree = spawns_agree && r.checksum[k] == row[0].checksum[k];
      }
    }
    std::printf("  %4u workers: placements not below the task (least-loaded scan) over %zu:",
                sc.workers, from_list);
    for (int k = 0; k < spawn_kinds; ++k) std::printf(" %s %u;", spawn_names[k], row[0].remote[k]);
    std::printf("\n");
    spawns.push_back(std::move(row));
  }
  const machine_load part2_after = machine_load::now();
  std::printf("  answers identical across layouts: %s; meanwhile %s\n\n",
              spawns_agree ? "yes" : "NO", meanwhile(part2_before, part2_after).c_str());
  std::vector<std::vector<table_row>> part2_rows;
  for (const auto& row : spawns) {
    std::vector<table_row> rows;
    for (std::size_t l = 0; l < layout_count; ++l) {
      rows.push_back(table_row{name_of(all_layouts[l]),
                               std::vector<sample>(row[l].cost, row[l].cost + spawn_kinds)});
    }
    part2_rows.push_back(std::move(rows));
  }
  const std::vector<const char*> part2_columns(spawn_names, spawn_names + spawn_kinds);
  if (have_instr) {
    print_table("instructions per placement", part2_columns, part2_rows, true);
    std::printf("\n");
  }
  print_table(g_mode == count_mode::callgrind ? "ns per placement, under valgrind"
                                              : "ns per placement",
              part2_columns, part2_rows, false);

  // ---- Part 3.
  std::printf(
      "\n== 3. Contention: one updater thread per worker, pinned, %llu set() each, "
      "median of %llu ==\n",
      static_cast<unsigned long long>(ops), static_cast<unsigned long long>(reps));
  const std::vector<unsigned> cpus = allowed_cpus();
  std::vector<contention_result> two_llc;
  bool two_llc_disturbed = false;
  if (g_mode == count_mode::callgrind) {
    std::printf("skipped under valgrind (it runs one thread at a time)\n");
  } else if (cpus.size() < 2) {
    std::printf("skipped: this process may run on %zu CPU(s), needs 2\n", cpus.size());
  } else {
    std::printf(
        "CPUs %u and %u; ns/update = wall time from the first thread's start to the "
        "last one's end / set() per thread; solo = the same loop, one thread\n",
        cpus[0], cpus[1]);
    for (const contention_case& cc : contention_cases) {
      bool pinned = false;
      const machine_load before = machine_load::now();
      const std::vector<contention_result> rs =
          run_contention(cc, cpus, ops, static_cast<unsigned>(reps), &pinned);
      const machine_load after = machine_load::now();
      std::printf("\n%s (\"%s\")%s; meanwhile %s\n", cc.label, cc.synthetic,
                  pinned ? "" : "  [WARNING: pinning failed]", meanwhile(before, after).c_str());
      std::printf("%-14s %9s %9s %17s %8s %8s %11s %9s\n", "layout", "solo ns", "2-thr ns",
                  "(min..max)", "2thr/solo", "/global", "excess ns", "/global");
      const double g_excess = rs[0].duo - rs[0].solo;
      for (std::size_t l = 0; l < layout_count; ++l) {
        const contention_result& r = rs[l];
        const double excess = r.duo - r.solo;
        std::printf("%-14s %9.2f %9.2f   (%6.2f..%6.2f) %8.2f %8.3f %11.2f %9.3f",
                    name_of(all_layouts[l]), r.solo, r.duo, r.duo_min, r.duo_max, r.duo / r.solo,
                    r.duo / rs[0].duo, excess, excess / g_excess);
        if (!std::isnan(r.instr)) std::printf("  %.1f instr/update", r.instr);
        std::printf("\n");
      }
      std::printf("  (excess = 2-thread minus solo: the part contention adds)\n");
      if (std::string_view(cc.label) == "two LLCs") {
        two_llc = rs;
        two_llc_disturbed = other_share(before, after) > disturbed_share;
      }
    }
  }

  // ---- Part 4.
  std::printf("\n== 4. Summary ==\n");
  // Target: per_llc_bytes' find at most global's, every size and variant;
  // judged on instructions where counted, else on this run's ns.
  bool finds_met = true;
  const char* basis = have_instr ? "instructions" : "ns";
  for (std::size_t s = 0; s < std::size(sizes); ++s) {
    const layout_result& g = results[s][0];
    const layout_result& b = results[s][bytes_variant];
    const auto ratio = [&](const sample& x, const sample& y) {
      return have_instr ? x.instr / y.instr : x.ns / y.ns;
    };
    std::printf("  %4u workers: per_llc_bytes/global %s: update %.3f", sizes[s].workers, basis,
                ratio(b.update, g.update));
    for (int k = 0; k < find_kinds; ++k) {
      const double r = ratio(b.find[k], g.find[k]);
      finds_met = finds_met && r <= 1.0;
      std::printf(", %s %.3f", find_names[k], r);
    }
    std::printf("; placement");
    for (int k = 0; k < spawn_kinds; ++k) {
      std::printf(", %s %.3f", spawn_names[k],
                  ratio(spawns[s][layout_count - 1].cost[k], spawns[s][0].cost[k]));
    }
    std::printf("\n");
  }
  std::printf("  per_llc_bytes find <= global's at every size and variant (%s): %s\n", basis,
              finds_met ? "MET" : "NOT MET");
  {
    const layout_result& b = results[std::size(sizes) - 1][bytes_variant];
    if (g_mode == count_mode::callgrind) {
      std::printf(
          "  per_llc_bytes find busy at %u workers: %.1f instructions (run without valgrind "
          "for the 500 ns target)\n",
          sizes[std::size(sizes) - 1].workers, b.find[find_busy].instr);
    } else {
      std::printf("  per_llc_bytes find busy at %u workers: %.1f ns (target < 500 ns): %s\n",
                  sizes[std::size(sizes) - 1].workers, b.find[find_busy].ns,
                  b.find[find_busy].ns < 500 ? "MET" : "NOT MET");
    }
  }
  if (two_llc.empty()) {
    std::printf("  per_llc_bytes update cost under contention: not measured in this run\n");
  } else {
    const double pct = 100.0 * two_llc[layout_count - 1].duo / two_llc[0].duo;
    const double g_excess = two_llc[0].duo - two_llc[0].solo;
    const double b_excess = two_llc[layout_count - 1].duo - two_llc[layout_count - 1].solo;
    std::printf(
        "  per_llc_bytes update cost under contention = %.1f%% of global (target <= 5%%): "
        "%s\n",
        pct, pct <= 5.0 ? "MET" : "NOT MET");
    std::printf(
        "    (two updaters in two LLCs: %.2f vs %.2f ns/update; the share of the "
        "contention excess alone: %.1f%%; kernel series: 0.49%%)\n",
        two_llc[layout_count - 1].duo, two_llc[0].duo,
        g_excess > 0 ? 100.0 * b_excess / g_excess : std::nan(""));
    std::printf(
        "    (floor of that ratio here, had contention cost per_llc_bytes nothing: its solo "
        "cost / global's contended cost = %.1f%%)\n",
        100.0 * two_llc[layout_count - 1].solo / two_llc[0].duo);
    if (two_llc_disturbed) {
      std::printf(
          "    WARNING: other processes were busy during that measurement; rerun on a "
          "quiet machine\n");
    }
  }

  // ---- Part 5.
  std::printf("\n== 5. Reschedule requests: claim_above(50) with no request above 50 ==\n");
  std::printf("  below top: per claim; stale top: per round of request(90), its claim, one scan\n");
  std::printf("  %-14s %22s %22s %22s\n", "workers", "below top", "stale top", "after the scan");
  bool claims_none = true;
  for (const size_case& sc : sizes) {
    const workload w = make_workload(sc);
    const auto n = static_cast<unsigned>(w.places.size());
    urt::detail::resched_requests r(w.places);
    const auto claims = [&] {
      return measure_median(
          single_reps(), w.froms.size(),
          [&] {
            for (unsigned from : w.froms) {
              const unsigned got = r.claim_above(50, from);
              claims_none = claims_none && got == urt::detail::resched_requests::none;
              keep(got);
            }
          },
          main_counter);
    };
    r.request(n - 2, 1);
    const sample below = claims();
    const sample stale = measure_median(
        single_reps(), w.froms.size(),
        [&] {
          for (unsigned from : w.froms) {
            r.request(n - 1, 90);
            claims_none = claims_none && r.claim_above(50, n - 2) == n - 1;  // top stays at 90
            const unsigned got = r.claim_above(50, from);  // scans, lowers top to 1
            claims_none = claims_none && got == urt::detail::resched_requests::none;
            keep(got);
          }
        },
        main_counter);
    const sample repaired = claims();  // top says 1 again
    const auto cell = [&](const sample& x) {
      return have_instr ? std::to_string(static_cast<long>(x.instr)) + " instr, " +
                              std::to_string(static_cast<long>(x.ns)) + " ns"
                        : std::to_string(static_cast<long>(x.ns)) + " ns";
    };
    std::printf("  %-14u %22s %22s %22s\n", n, cell(below).c_str(), cell(stale).c_str(),
                cell(repaired).c_str());
  }
  if (!claims_none) std::printf("  ERROR: a claim answered something other than expected\n");

  std::printf("  total run time %.1f s\n", seconds_since(t_start));
  return answers_agree && spawns_agree && claims_none ? 0 : 1;
}
