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
//      Under `valgrind --tool=callgrind` the bench counts instructions with
//      callgrind's client requests instead (exact, and usable in VMs without
//      a PMU); it then skips part 2, whose timings would be meaningless.
//   2. Contention on this machine: one updater thread per worker, each pinned
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
//   3. Summary: per_llc_bytes' update cost under contention as a share of
//      global's, from this run's numbers, against the target (<= 5%;
//      the kernel's "[PATCH v2 4/4] sched/rt: Split cpupri_vec->cpumask to
//      per NUMA node to reduce contention" measured 0.49%). Also the share of
//      the contention excess alone (2-thread minus solo), and the floor the
//      first share has on this machine (per_llc_bytes solo / global 2-thread):
//      with two CPUs, global's contended update is only a few times its
//      uncontended one, so a per-update share of 5% may be out of reach.
//   Each part says how much CPU time other processes (and the hypervisor's
//   steal) took meanwhile, from /proc/stat, and flags it above 10%.
//
// Options: --ops=N (set() calls per thread in part 2, default 5000000),
// --reps=N (repetitions in part 2, default 5).
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
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "cpupri.hpp"
#include "instr_measure.hpp"
#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/topology.hpp"

namespace {

using namespace urt_bench;
using urt::cpupri_layout;
using urt::worker_place;
using urt::worker_set;
using urt::detail::cpupri;

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

find_stats one_pass(const cpupri& cp, const worker_set* affinity, const workload& w) {
  find_stats st;
  std::uint64_t rot = 0;
  for (unsigned from : w.froms) {
    const unsigned r =
        cp.find(find_priority, affinity, from, cpupri::none, static_cast<unsigned>(rot++));
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

layout_result run_single(cpupri_layout layout, const workload& w, const perf_counter* counter) {
  layout_result out;
  const bool grind = g_mode == count_mode::callgrind;
  cpupri cp(layout, w.places);
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
    out.stats[kind] = one_pass(cp, affinity, w);  // also the warm-up
    // Whole passes over the from list (so that every layout averages over the
    // same queries): as many as fit in about 30 ms, 1..100 (1e5 finds).
    std::uint64_t passes = 1;
    if (!grind) {
      const auto t0 = steady::now();
      keep(one_pass(cp, affinity, w).checksum);
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
              const unsigned r = cp.find(find_priority, affinity, from, cpupri::none,
                                         static_cast<unsigned>(rot++));
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

// One table: rows layout x size, columns update and finds, each with its
// ratio to the global layout of the same size.
void print_table(const char* unit, const std::vector<std::vector<layout_result>>& results,
                 bool instr) {
  std::printf("%-7s %-14s", "workers", "layout");
  std::printf(" %10s %6s", "update", "/glob");
  for (const char* f : find_names) std::printf(" %10s %6s", f, "/glob");
  std::printf("   (%s)\n", unit);
  for (std::size_t s = 0; s < std::size(sizes); ++s) {
    const layout_result& g = results[s][0];
    for (std::size_t l = 0; l < layout_count; ++l) {
      const layout_result& r = results[s][l];
      std::printf("%-7u %-14s", sizes[s].workers, name_of(all_layouts[l]));
      const auto pick = [&](const sample& x) { return instr ? x.instr : x.ns; };
      print_cell(pick(r.update), pick(g.update));
      for (int k = 0; k < find_kinds; ++k) print_cell(pick(r.find[k]), pick(g.find[k]));
      std::printf("\n");
    }
  }
}

// ---------------------------------------------------------------------------
// Part 2: contention between updater threads pinned to distinct CPUs.

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
    for (cpupri_layout layout : all_layouts) row.push_back(run_single(layout, w, main_counter));
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
  std::printf("  answers identical across layouts: %s; meanwhile %s%s\n\n",
              answers_agree ? "yes" : "NO", load_between(part1_before, part1_after).c_str(),
              other_share(part1_before, part1_after) > disturbed_share ? " [DISTURBED]" : "");
  if (have_instr) {
    print_table("instructions per operation", results, true);
    std::printf("\n");
  }
  print_table(
      g_mode == count_mode::callgrind ? "ns per operation, under valgrind" : "ns per operation",
      results, false);

  // ---- Part 2.
  std::printf(
      "\n== 2. Contention: one updater thread per worker, pinned, %llu set() each, "
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
      std::printf("\n%s (\"%s\")%s; meanwhile %s%s\n", cc.label, cc.synthetic,
                  pinned ? "" : "  [WARNING: pinning failed]", load_between(before, after).c_str(),
                  other_share(before, after) > disturbed_share ? " [DISTURBED]" : "");
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

  // ---- Part 3.
  std::printf("\n== 3. Summary ==\n");
  if (have_instr) {
    for (std::size_t s = 0; s < std::size(sizes); ++s) {
      const layout_result& g = results[s][0];
      const layout_result& b = results[s][layout_count - 1];
      std::printf("  %4u workers: per_llc_bytes/global instructions: update %.3f", sizes[s].workers,
                  b.update.instr / g.update.instr);
      for (int k = 0; k < find_kinds; ++k) {
        std::printf(", %s %.3f", find_names[k], b.find[k].instr / g.find[k].instr);
      }
      std::printf("\n");
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
  std::printf("  total run time %.1f s\n", seconds_since(t_start));
  return answers_agree ? 0 : 1;
}
