// urt-cid-bench: what concurrency IDs cost (runtime/cid.*), driving the
// cid module directly on the worker counts of synthetic topologies.
//
//   (a) One compaction step (batched_scan) for batch 8, 16 and 32 at 128,
//       256 and 1024 workers, single-threaded: "reclaiming", every visited
//       worker's ID cached and idle past the threshold (each step takes
//       back `batch` IDs: the most work a step does), and "scanning", every
//       worker running the group (nothing to take). A full pass (every
//       step of one pass, batch 16) per worker count, and its cost per
//       worker visited, to show it linear. The step includes its own two
//       clock reads (for the cost histogram of group_stats).
//   (b) this_task::cid() inside a task once the ID is held: the fast path.
//   (c) Per task switch, for both modes (cid_user, as a worker's step calls
//       it): alternating two groups (the ID of one given up or cached, the
//       other's taken), staying in one group (a step check and keep()),
//       and holding no ID (what workers whose tasks never ask pay). Single
//       thread, then 2 threads on one space pinned to CPUs 0 and 1 (their
//       switches contend on the group's bitmap under ownership).
//   (d) Burst then decay, 256 workers, virtual time: every worker runs the
//       group, then half of them stop every 200 ms down to 2; each active
//       worker runs a task and goes idle once a millisecond. The highest ID
//       in use at the end of each phase, both modes, the runtime defaults
//       (threshold and interval 100 ms, batch 16).
// Instructions come from the hardware counter where there is one, or from
// callgrind (`valgrind --tool=callgrind build/release/bench/urt-cid-bench
// --part=a`, which then counts exactly); ns always, medians of 5 runs.
// Targets (printed with yes/no): a batch-16 step at most 1 us at every
// worker count (the kernel's batch series: 3-16 us at 128 CPUs); the full
// pass linear (per worker visited at 1024 at most 2x that at 128); the
// cid() fast path a few ns (at most 10).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cid.hpp"
#include "instr_measure.hpp"
#include "urt/urt.hpp"

namespace {

using namespace urt_bench;
using urt::concurrency_id_mode;
using urt::detail::cid_space;
using urt::detail::cid_table;
using urt::detail::cid_user;

constexpr std::int64_t ms = 1'000'000;
constexpr unsigned reps = 5;

const char* name_of(concurrency_id_mode m) {
  return m == concurrency_id_mode::batched_scan ? "batched_scan" : "ownership";
}

cid_space::config config_of(concurrency_id_mode mode, unsigned batch) {
  return {.mode = mode, .idle_threshold_ns = 100 * ms, .batch = batch, .interval_ns = 100 * ms};
}

std::string cell(const sample& s) {
  char buf[64];
  if (std::isnan(s.instr)) {
    std::snprintf(buf, sizeof buf, "%9.1f ns", s.ns);
  } else {
    std::snprintf(buf, sizeof buf, "%7.1f ns %6.0f i", s.ns, s.instr);
  }
  return buf;
}

// ---- (a) -----------------------------------------------------------------

enum class state { reclaiming, scanning };

// One full pass over a space of `workers` in `st`; per step.
sample pass_cost(unsigned workers, unsigned batch, state st, const perf_counter* counter) {
  std::vector<sample> runs;
  for (unsigned r = 0; r < reps; ++r) {
    cid_space space(workers, config_of(concurrency_id_mode::batched_scan, batch), 0);
    for (unsigned w = 0; w < workers; ++w) {
      const unsigned id = space.activate(w);
      if (st == state::reclaiming) space.deactivate(w, id, 0);
    }
    const unsigned steps = (workers + batch - 1) / batch;
    const std::int64_t now = 200 * ms;  // past the interval and the threshold
    unsigned visited = 0;
    runs.push_back(measure(steps, [&] {
      for (unsigned i = 0; i < steps; ++i) visited += space.step(now);
    }, counter));
    if (visited != workers) std::fprintf(stderr, "urt-cid-bench: a pass visited %u of %u\n", visited, workers);
  }
  return median_of(runs);
}

void part_a(const perf_counter* counter) {
  std::printf("(a) one compaction step (batched_scan), single-threaded, per step\n");
  std::printf("    %-8s %-6s %-22s %-22s\n", "workers", "batch", "reclaiming", "scanning");
  bool step_ok = true;
  std::vector<double> per_worker;
  std::vector<double> pass_us;
  std::vector<double> pass_instr;  // NaN where not counted
  for (const unsigned workers : {128U, 256U, 1024U}) {
    for (const unsigned batch : {8U, 16U, 32U}) {
      const sample rec = pass_cost(workers, batch, state::reclaiming, counter);
      const sample scan = pass_cost(workers, batch, state::scanning, counter);
      std::printf("    %-8u %-6u %-22s %-22s\n", workers, batch, cell(rec).c_str(), cell(scan).c_str());
      if (batch == 16) {
        step_ok = step_ok && rec.ns <= 1000 && scan.ns <= 1000;
        per_worker.push_back(rec.ns / 16);  // a pass, per worker visited
        pass_us.push_back(rec.ns * ((workers + 15) / 16) / 1000);
        pass_instr.push_back(rec.instr * ((workers + 15) / 16));
      }
    }
  }
  std::printf("    full pass (batch 16, reclaiming): 128: %.2f us, 256: %.2f us, 1024: %.2f us;\n"
              "    per worker visited: %.1f, %.1f, %.1f ns\n",
              pass_us[0], pass_us[1], pass_us[2], per_worker[0], per_worker[1], per_worker[2]);
  if (!std::isnan(pass_instr[0])) {
    std::printf("    full pass instructions: 128: %.0f, 256: %.0f, 1024: %.0f; per worker visited: "
                "%.1f, %.1f, %.1f\n",
                pass_instr[0], pass_instr[1], pass_instr[2], pass_instr[0] / 128,
                pass_instr[1] / 256, pass_instr[2] / 1024);
  }
  if (g_mode == count_mode::callgrind) {
    std::printf("    (timings under valgrind say nothing: no verdicts)\n\n");
    return;
  }
  std::printf("    a batch-16 step at most 1 us at every worker count: %s\n", step_ok ? "yes" : "no");
  std::printf("    full pass linear (per worker at 1024 at most 2x at 128): %s (%.2fx)\n\n",
              per_worker[2] <= 2 * per_worker[0] ? "yes" : "no", per_worker[2] / per_worker[0]);
}

// ---- (b) -----------------------------------------------------------------

void part_b() {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("core:1 pu:1");
  urt::runtime rt(o);
  constexpr std::uint64_t calls = 10'000'000;
  std::vector<sample> runs;
  for (unsigned r = 0; r < reps; ++r) {
    rt.spawn({.priority = 10}, [&] {
      const perf_counter counter;  // this worker thread's
      (void)urt::this_task::cid();  // held from here on
      unsigned sum = 0;
      runs.push_back(measure(calls, [&] {
        for (std::uint64_t i = 0; i < calls; ++i) {
          sum += urt::this_task::cid();
          keep(sum);
        }
      }, counter.ok() && g_mode == count_mode::perf ? &counter : nullptr));
    });
  }
  rt.stop();
  const sample s = median_of(runs);
  std::printf("(b) this_task::cid(), ID held (the loop's own cost included): %s per call\n",
              cell(s).c_str());
  std::printf("    a few ns (at most 10): %s\n\n", s.ns <= 10 ? "yes" : "no");
}

// ---- (c) -----------------------------------------------------------------

enum class pattern { alternate, same, none };

// `switches` switches by worker `t` of `table` in pattern `p`.
void switches_by(cid_table& table, unsigned t, pattern p, std::uint64_t switches) {
  cid_user user(table, t);
  unsigned sum = 0;
  for (std::uint64_t i = 0; i < switches; ++i) {
    switch (p) {
      case pattern::alternate: {
        const unsigned g = static_cast<unsigned>(i & 1);
        user.at_switch(static_cast<int>(g));
        sum += user.get(g);
        break;
      }
      case pattern::same:
        user.at_switch(0);
        sum += user.get(0);
        break;
      case pattern::none:
        user.at_switch(0);
        break;
    }
    keep(sum);
  }
  user.at_switch(-1);
}

// One worker switching on the calling thread: per switch.
sample switch_cost(concurrency_id_mode mode, pattern p, std::uint64_t switches,
                   const perf_counter* counter) {
  cid_table table(2, config_of(mode, 16));
  table.create(0);
  table.create(1);
  return measure(switches, [&] { switches_by(table, 0, p, switches); }, counter);
}

// Two workers of one table switching at once, pinned to CPUs 0 and 1: ns
// per switch, the mean of the two.
double switch_cost_2(concurrency_id_mode mode, std::uint64_t switches) {
  cid_table table(2, config_of(mode, 16));
  table.create(0);
  table.create(1);
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  double ns[2] = {};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < 2; ++t) {
    pool.emplace_back([&, t] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(t % std::max(1U, std::thread::hardware_concurrency()), &set);
      pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      ready.fetch_add(1);
      while (!go.load()) cpu_relax();
      const auto t0 = steady::now();
      switches_by(table, t, pattern::alternate, switches);
      ns[t] = seconds_since(t0) * 1e9 / static_cast<double>(switches);
    });
  }
  while (ready.load() != 2) cpu_relax();
  go.store(true);
  for (auto& th : pool) th.join();
  return (ns[0] + ns[1]) / 2;
}

void part_c(const perf_counter* counter) {
  const std::uint64_t switches = g_mode == count_mode::callgrind ? 100'000 : 5'000'000;
  std::printf("(c) per task switch (cid_user::at_switch and get), median of %u\n", reps);
  std::printf("    %-13s %-26s %-16s %-26s %-16s\n", "mode", "alternating 2 groups, 1 thr",
              "2 threads", "same group, 1 thread", "no ID held");
  double alt[2][2] = {};
  for (const concurrency_id_mode mode :
       {concurrency_id_mode::batched_scan, concurrency_id_mode::ownership}) {
    std::vector<sample> alt1;
    std::vector<double> alt2;
    std::vector<sample> same1;
    std::vector<sample> none1;
    for (unsigned r = 0; r < reps; ++r) {
      alt1.push_back(switch_cost(mode, pattern::alternate, switches, counter));
      if (g_mode != count_mode::callgrind) alt2.push_back(switch_cost_2(mode, switches));
      same1.push_back(switch_cost(mode, pattern::same, switches, counter));
      none1.push_back(switch_cost(mode, pattern::none, switches, counter));
    }
    const unsigned m = mode == concurrency_id_mode::batched_scan ? 0 : 1;
    alt[m][0] = median_of(alt1).ns;
    alt[m][1] = alt2.empty() ? std::nan("") : median(alt2);
    char two[32];
    std::snprintf(two, sizeof two, "%9.1f ns", alt[m][1]);
    std::printf("    %-13s %-26s %-16s %-26s %-16s\n", name_of(mode), cell(median_of(alt1)).c_str(),
                two, cell(median_of(same1)).c_str(), cell(median_of(none1)).c_str());
  }
  if (g_mode == count_mode::callgrind) {
    std::printf("    (timings under valgrind say nothing; 2 threads not run)\n\n");
    return;
  }
  std::printf("    alternating, ownership / batched_scan: 1 thread %.2fx, 2 threads %.2fx\n\n",
              alt[1][0] / alt[0][0], alt[1][1] / alt[0][1]);
}

// ---- (d) -----------------------------------------------------------------

void part_d() {
  constexpr unsigned workers = 256;
  std::printf("(d) burst then decay, %u workers, virtual time: all run the group, then every 200 ms\n"
              "    the lower half stops; each active worker runs a task and idles once a ms (the\n"
              "    tasks of one ms run at once). Highest ID in use while they run, at the end of\n"
              "    each phase, and when it first fell below the active count\n",
              workers);
  std::printf("    %-14s %-28s %-28s\n", "active workers", "batched_scan", "ownership");
  struct run {
    explicit run(concurrency_id_mode mode)
        : space(workers, config_of(mode, 16), 0), held(workers, -1), seen(workers, 0) {}
    cid_space space;
    std::vector<int> held;
    std::vector<std::uint32_t> seen;
    int converged_ms = -1;
    int running_highest = -1;  // while the tasks of the last tick ran
  };
  run runs[2] = {run(concurrency_id_mode::batched_scan), run(concurrency_id_mode::ownership)};
  std::int64_t now = 0;
  for (unsigned active = workers; active >= 2; active /= 2) {
    const unsigned first = workers - active;  // the upper workers, which took the high IDs
    for (run& r : runs) r.converged_ms = -1;
    for (int tick = 0; tick < 200; ++tick) {
      now += ms;
      for (run& r : runs) {
        for (unsigned w = first; w < workers; ++w) {  // the tasks start ...
          if (r.held[w] < 0) r.held[w] = static_cast<int>(r.space.activate(w));
          r.held[w] = static_cast<int>(r.space.keep(w, static_cast<unsigned>(r.held[w]), r.seen[w]));
        }
        r.running_highest = r.space.highest_in_use();
        if (r.converged_ms < 0 && r.running_highest < static_cast<int>(active)) r.converged_ms = tick;
        for (unsigned w = first; w < workers; ++w) {  // ... and end: idle
          r.space.step(now);
          r.space.deactivate(w, static_cast<unsigned>(r.held[w]), now);
          r.held[w] = -1;
        }
      }
    }
    char cells[2][40];
    for (int k = 0; k < 2; ++k) {
      std::snprintf(cells[k], sizeof cells[k], "%d, below %u after %d ms", runs[k].running_highest,
                    active, runs[k].converged_ms);
    }
    std::printf("    %-14u %-28s %-28s\n", active, cells[0], cells[1]);
  }
  std::printf("    (-1 ms: not within the phase. batched_scan keeps idle workers' IDs cached until\n"
              "     a pass finds them idle for the threshold, 100 ms; ownership gives each back\n"
              "     when its worker goes idle)\n\n");
}

[[noreturn]] void usage(int code) {
  std::printf("usage: urt-cid-bench [--part=abcd]  (default: all; under callgrind a and c)\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string parts = "abcd";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--part=", 0) == 0) {
      parts = arg.substr(7);
      if (parts.empty() || parts.find_first_not_of("abcd") != std::string::npos) usage(2);
    } else if (arg == "--help" || arg == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "urt-cid-bench: unknown argument '%s'\n", arg.c_str());
      usage(2);
    }
  }
  const perf_counter counter;
  g_mode = pick_count_mode(counter);
  if (g_mode == count_mode::callgrind) parts.erase(std::remove_if(parts.begin(), parts.end(), [](char c) { return c == 'b' || c == 'd'; }), parts.end());
  std::printf("instructions: %s\n\n",
              g_mode == count_mode::callgrind ? "callgrind"
              : g_mode == count_mode::perf    ? "hardware counter"
                                              : ("none: " + why_no_counter(counter.error())).c_str());
  const perf_counter* c = g_mode == count_mode::perf ? &counter : nullptr;
  if (parts.find('a') != std::string::npos) part_a(c);
  if (parts.find('b') != std::string::npos) part_b();
  if (parts.find('c') != std::string::npos) part_c(c);
  if (parts.find('d') != std::string::npos) part_d();
  return 0;
}
