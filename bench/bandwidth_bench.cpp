// urt-bandwidth-bench: what the per-worker FIFO budget costs and what it
// buys (a benchmark, not a test).
//
// (a) Accounting cost per FIFO task switch: each thread runs the scheduling
//     point's budget work (a clock read, tick, decide, picked) in a loop,
//     per_worker on its own budget, against global_lock: one budget shared
//     by every thread behind one lock, checked on every switch (the kernel's
//     def_rt_bandwidth before per-CPU accounting; it exists only here). At
//     1 and 2 threads, and oversubscribed (4x the CPUs). Thread t is pinned
//     to the (t mod N)-th of the N CPUs the process may run on (round-robin
//     when oversubscribed), as urt pins one worker per CPU: unpinned, the
//     OS sometimes ran both threads of the 2-thread case in turn on one
//     core, where the lock is never contended (ratio 0.179 in one run,
//     0.023 in the next). Median of interleaved runs; ratio per_worker /
//     global_lock.
// (b) Blackout and starvation on one worker: a 1 kHz periodic FIFO task at
//     90 measures its wake-up latency (start - release) next to a FIFO hog
//     at 50 and a stream of normal tasks, all respawning themselves. Per
//     configuration: off (no budget), urt's default (runtime_options{}),
//     and kernel-like (50 ms of normal service per 1000 ms, at the end of
//     the period: deferred 950/1000 ms, the 6.12 fair server's shape). The
//     periodic task's p99 and max, the max it adds over off, the normal
//     class's longest wait between two completions, and its share: over
//     the whole run (start-up and shut-down included), exactly over the
//     whole periods between the first and the last period end seen (the
//     steady window; period_log says how the ends are found), and the
//     lowest over any 10 consecutive periods of it. Each share is shown
//     raw against the configured one, and against the cooperative bound
//     DESIGN.md documents: configured - longest FIFO stretch / window (a
//     FIFO task picked inside the budget runs to its end; its overrun is
//     carried into the next period, so a window can end owing at most one
//     FIFO stretch).
#include <getopt.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth.hpp"
#include "spinlock.hpp"
#include "urt/urt.hpp"

namespace {

using namespace std::chrono_literals;
using urt::clock;
using urt::detail::bandwidth;
using urt::detail::run_class;

// ---- (a) accounting cost ----------------------------------------------

// One scheduling point's budget work, as worker::step() does it.
void account(bandwidth& bw, std::uint64_t i) {
  const clock::time_point now = clock::now();
  bw.tick(now);
  const bool normal_waiting = (i & 7) == 0;
  const auto allow = bw.decide(now, normal_waiting);
  bw.picked(allow == bandwidth::allow::any ? run_class::fifo : run_class::normal);
}

// The same work as worker::consult_budgets() does it: must_look() first,
// and the clock read and the rest only where the budget can change the
// pick (normal work waiting, a class change, a hold). The global_lock
// design checks its shared budget on every switch, as the kernel did.
void account_as_step(bandwidth& bw, std::uint64_t i) {
  const bool normal_waiting = (i & 7) == 0;
  if (bw.must_look(run_class::fifo, normal_waiting)) account(bw, i);
}

struct shared_budget {
  urt::detail::spinlock lock;
  bandwidth bw{urt::bandwidth_options{}, clock::now()};
};

enum class variant { clock_only, per_worker, per_worker_step, global_lock };

// The CPUs this process may run on (its affinity mask), in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

// Pins the calling thread to `cpu`; false when the OS refuses.
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

std::atomic<bool> pin_failed{false};

// ns per switch with `threads` threads each doing `iterations`.
// Thread t runs on cpus[t % cpus.size()].
double run_accounting(variant v, unsigned threads, std::uint64_t iterations,
                      const std::vector<int>& cpus) {
  shared_budget shared;
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  std::vector<double> ns(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (!pin_to(cpus[t % cpus.size()])) pin_failed.store(true);
      bandwidth own(urt::bandwidth_options{}, clock::now());
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const auto start = clock::now();
      std::int64_t sink = 0;
      for (std::uint64_t i = 0; i < iterations; ++i) {
        switch (v) {
          case variant::clock_only:  // the clock read any accounting needs, alone
            sink += clock::now().time_since_epoch().count() & 1;
            break;
          case variant::per_worker:
            account(own, i);
            break;
          case variant::per_worker_step:
            account_as_step(own, i);
            break;
          case variant::global_lock:
            shared.lock.lock();
            account(shared.bw, i);
            shared.lock.unlock();
            break;
        }
      }
      if (sink == -1) std::puts("");  // keeps the clock reads
      ns[t] = static_cast<double>((clock::now() - start).count()) / static_cast<double>(iterations);
    });
  }
  while (ready.load() != threads) std::this_thread::yield();
  go.store(true);
  for (auto& th : pool) th.join();
  double sum = 0;
  for (const double each : ns) sum += each;
  return sum / threads;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void part_a(unsigned rounds, std::uint64_t iterations) {
  std::vector<int> allowed = allowed_cpus();
  if (allowed.empty()) allowed.push_back(0);
  const auto cpus = static_cast<unsigned>(allowed.size());
  std::printf("(a) budget accounting per FIFO task switch, ns, median of %u interleaved rounds, "
              "%u CPUs,\n    thread t pinned to the (t mod %u)-th of them; every 8th switch "
              "finds normal work waiting\n",
              rounds, cpus, cpus);
  std::printf("    %-24s %7s %11s %9s %12s %8s %8s %11s\n", "threads", "clock", "per_worker",
              "as_step", "global_lock", "ratio", "step", "past clock");
  double step_at_2 = 0;
  double past_at_2 = 0;
  for (const unsigned threads : {1U, 2U, 4 * cpus}) {
    std::vector<double> clk, per, step, glob;
    for (unsigned r = 0; r < rounds; ++r) {
      clk.push_back(run_accounting(variant::clock_only, threads, iterations, allowed));
      per.push_back(run_accounting(variant::per_worker, threads, iterations, allowed));
      step.push_back(run_accounting(variant::per_worker_step, threads, iterations, allowed));
      glob.push_back(run_accounting(variant::global_lock, threads, iterations, allowed));
    }
    const double c = median(clk);
    const double p = median(per);
    const double st = median(step);
    const double g = median(glob);
    // Noise can put a variant below the clock-only loop: then no ratio.
    const double past = g - c > 1.0 ? (p - c) / (g - c) : -1.0;
    std::string label = std::to_string(threads);
    if (threads > cpus) label += " (oversubscribed)";
    std::printf("    %-24s %7.1f %11.1f %9.1f %12.1f %8.3f %8.3f %11s\n", label.c_str(), c, p, st, g,
                p / g, st / g, past < 0 ? "n/a (noise)" : std::to_string(past).substr(0, 6).c_str());
    if (threads == 2) {
      step_at_2 = st / g;
      past_at_2 = past;
    }
  }
  std::printf(
      "    (per_worker: the clock read, tick, decide and picked at every switch; as_step: the\n"
      "     same as worker::step runs it, must_look() first, so the clock is read only where\n"
      "     the budget can change the pick; global_lock: one shared budget behind one lock,\n"
      "     checked with a clock read at every switch. ratio: per_worker / global_lock; step:\n"
      "     as_step / global_lock; past clock: per_worker / global_lock, both less the clock\n"
      "     read)\n");
  if (pin_failed.load()) {
    std::printf("    warning: the OS refused to pin some threads; they ran unpinned\n");
  }
  std::printf("    per_worker as the step runs it at most 1/10 of global_lock at 2 threads: %s "
              "(%.3f)\n",
              step_at_2 <= 0.1 ? "yes" : "no", step_at_2);
  std::printf("    per_worker at most 1/10 of global_lock at 2 threads, past the clock read: %s "
              "(%.3f)\n\n",
              past_at_2 >= 0 && past_at_2 <= 0.1 ? "yes" : "no", past_at_2);
}

// ---- (b) blackout and starvation ----------------------------------------

void spin_for(std::chrono::nanoseconds d) {
  const auto until = clock::now() + d;
  while (clock::now() < until) {
  }
}

// The worker's counters at its period ends, read from inside its FIFO
// tasks. The worker charges the time since its previous scheduling point
// at each point, so a task reading rt.stats() sees them charged up to its
// own pick; fifo + normal + idle is then the time from the worker's start
// to that pick, and its periods start at whole multiples of the period from
// there (bandwidth.hpp). Normal work never runs out here (each normal task
// queues its successor before it ends), so a hold ends only when its period
// does, at the next scheduling point, whose pick is a FIFO task (the hog is
// always queued): that first FIFO task after a hold (seen as throttled_ns
// having grown) is picked at the step that ended it, and the time from the
// period's end to that step, total mod period, is the rest of the normal
// task that ran across the end. Taking it off the normal time gives the
// counters at the period's end exactly.
struct period_end {
  std::int64_t at_ns;          // from the worker's start: a whole number of periods
  std::int64_t normal_ns;      // normal time up to it
  std::uint64_t overrun_ns;    // overrun counted up to it (a period's, at its hold)
};

struct period_log {
  urt::runtime* rt = nullptr;
  std::int64_t period_ns = 0;
  std::uint64_t last_throttled = 0;
  std::vector<period_end> ends;

  // From every FIFO task, first thing; one worker, so never concurrently.
  void observe() {
    const urt::worker_stats w = rt->stats().workers[0];
    if (w.throttled_ns == last_throttled) return;
    last_throttled = w.throttled_ns;
    const auto total = static_cast<std::int64_t>(w.fifo_ns + w.normal_ns + w.idle_ns);
    const std::int64_t since_end = total % period_ns;  // the normal task's rest
    ends.push_back({total - since_end, static_cast<std::int64_t>(w.normal_ns) - since_end,
                    w.overrun_ns});
  }
};

// Normal shares over whole periods, between period ends the log saw.
struct shares {
  std::int64_t periods = 0;          // in the steady window (first to last end seen)
  std::int64_t unseen = 0;           // periods in it whose end was not seen
  double steady = -1;                // normal share over them; -1: fewer than 2 ends seen
  double min_window = -1;            // lowest over any window of window_periods; -1: none
  std::int64_t windows = 0;
  // The most overrun counted between two consecutive ends seen: one
  // period's (several periods' where ends were not seen).
  std::int64_t longest_overrun_ns = 0;
};

constexpr std::int64_t window_periods = 10;  // the criterion of the bandwidth tests

shares shares_of(const period_log& log) {
  shares r;
  const std::vector<period_end>& e = log.ends;
  if (e.size() < 2) return r;
  const std::int64_t p = log.period_ns;
  r.periods = (e.back().at_ns - e.front().at_ns) / p;
  r.unseen = r.periods - static_cast<std::int64_t>(e.size() - 1);
  r.steady = static_cast<double>(e.back().normal_ns - e.front().normal_ns) /
             static_cast<double>(e.back().at_ns - e.front().at_ns);
  for (std::size_t i = 1; i < e.size(); ++i) {
    r.longest_overrun_ns = std::max(
        r.longest_overrun_ns, static_cast<std::int64_t>(e[i].overrun_ns - e[i - 1].overrun_ns));
  }
  std::size_t j = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    const std::int64_t to = e[i].at_ns + window_periods * p;
    while (j < e.size() && e[j].at_ns < to) ++j;
    if (j == e.size()) break;
    if (e[j].at_ns != to) continue;  // that end was not seen
    const double share = static_cast<double>(e[j].normal_ns - e[i].normal_ns) /
                         static_cast<double>(window_periods * p);
    r.min_window = r.windows == 0 ? share : std::min(r.min_window, share);
    ++r.windows;
  }
  return r;
}

struct outcome {
  std::string name;
  std::vector<std::int64_t> latency_ns;
  std::int64_t longest_normal_wait_ns = 0;
  std::uint64_t normal_runs = 0;
  urt::worker_stats stats;
  shares normal;
  std::int64_t longest_fifo_ns = 0;  // the longest run of a FIFO task (hog or periodic)

  // The longest FIFO stretch between two scheduling points, as measured:
  // the longest FIFO task, or the most overrun counted in one period where
  // that is longer (it includes the step's own time around the task).
  [[nodiscard]] std::int64_t longest_stretch_ns() const {
    return std::max(longest_fifo_ns, normal.longest_overrun_ns);
  }
};

outcome run_config(const std::string& name, urt::bandwidth_options bw, const std::string& cpus,
                   std::chrono::milliseconds length) {
  outcome out;
  out.name = name;
  urt::runtime_options o;
  if (cpus.empty()) {
    o.topology = urt::topology_source::synthetic("core:1 pu:1");
  } else {
    o.cpus = cpus;
  }
  o.bandwidth = bw;
  urt::runtime rt(o);
  if (rt.worker_count() != 1) {
    std::fprintf(stderr, "urt-bandwidth-bench: --cpus must name one CPU\n");
    std::exit(2);
  }
  std::atomic<bool> stop{false};
  period_log log;
  log.rt = &rt;
  log.period_ns = bw.period.count();
  log.ends.reserve(static_cast<std::size_t>(length / bw.period) + 16);
  std::vector<std::int64_t> latency;
  latency.reserve(static_cast<std::size_t>(length / 1ms) + 16);
  std::int64_t last_normal = 0;
  std::int64_t longest = 0;
  std::uint64_t normal_runs = 0;
  // All three run on the one worker: no synchronisation needed between them.
  struct chain {
    urt::runtime& rt;
    urt::priority_t priority;
    std::chrono::nanoseconds slice;
    std::atomic<bool>& stop;
    std::function<void()> before;
    std::function<void()> after;
    std::int64_t longest_run_ns = 0;  // a run from its start to its end (wall time)
    void start() {
      rt.spawn({.priority = priority}, [this] {
        const clock::time_point began = clock::now();
        before();
        spin_for(slice);
        after();
        if (!stop.load(std::memory_order_relaxed)) start();
        longest_run_ns = std::max(longest_run_ns, (clock::now() - began).count());
      });
    }
  };
  const auto now_ns = [] { return clock::now().time_since_epoch().count(); };
  chain hog{rt, 50, 200us, stop, [&] { log.observe(); }, [] {}};
  chain normal{rt, urt::priority_normal, 100us, stop, [] {}, [&] {
                 const std::int64_t t = now_ns();
                 if (last_normal != 0) longest = std::max(longest, t - last_normal);
                 last_normal = t;
                 ++normal_runs;
               }};
  const auto start = clock::now() + 10ms;
  std::int64_t longest_periodic = 0;
  urt::periodic_task periodic = rt.every(1ms, {.priority = 90}, [&] {
    const clock::time_point began = clock::now();
    latency.push_back((began - urt::this_task::release_time()).count());
    log.observe();
    longest_periodic = std::max(longest_periodic, (clock::now() - began).count());
  }, start);
  normal.start();
  hog.start();
  std::this_thread::sleep_until(start + length);
  stop.store(true);
  periodic.cancel();
  rt.stop();
  out.latency_ns = std::move(latency);
  out.longest_normal_wait_ns = longest;
  out.normal_runs = normal_runs;
  out.stats = rt.stats().total();
  out.normal = shares_of(log);
  out.longest_fifo_ns = std::max(hog.longest_run_ns, longest_periodic);
  return out;
}

std::int64_t percentile(std::vector<std::int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

// A share as "5.0012%", or "n/a" when negative (not measured).
std::string percent_or_na(double share) {
  if (share < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f%%", 100.0 * share);
  return buf;
}

double whole_run_share(const urt::worker_stats& st) {
  const double all = static_cast<double>(st.fifo_ns + st.normal_ns + st.idle_ns);
  return all > 0 ? static_cast<double>(st.normal_ns) / all : 0.0;
}

void part_b(const std::string& cpus, std::chrono::milliseconds length) {
  const urt::bandwidth_options def = urt::runtime_options{}.bandwidth;
  std::printf("(b) one worker: a 1 kHz periodic FIFO task at 90, a FIFO hog at 50 (200 us slices),\n"
              "    normal tasks (100 us slices); %lld ms per configuration\n",
              static_cast<long long>(length.count()));
  std::vector<outcome> runs;
  runs.push_back(run_config("off", {.mode = urt::throttle_mode::off}, cpus, length));
  runs.push_back(run_config("default " + std::to_string(def.runtime / 1us) + "/" +
                                std::to_string(def.period / 1us) + " us",
                            def, cpus, length));
  runs.push_back(run_config("kernel-like 950/1000 ms",
                            {.mode = urt::throttle_mode::deferred, .runtime = 950ms, .period = 1000ms},
                            cpus, length));
  const std::int64_t off_max = percentile(runs[0].latency_ns, 1.0);
  std::printf("    %-26s %9s %9s %9s %13s %8s\n", "configuration", "p99 us", "max us", "added us",
              "longest wait", "holds");
  for (const outcome& r : runs) {
    const double p99 = static_cast<double>(percentile(r.latency_ns, 0.99)) / 1e3;
    const std::int64_t mx = percentile(r.latency_ns, 1.0);
    std::printf("    %-26s %9.1f %9.1f %9.1f %10.1f ms %8llu\n", r.name.c_str(), p99,
                static_cast<double>(mx) / 1e3, static_cast<double>(mx - off_max) / 1e3,
                static_cast<double>(r.longest_normal_wait_ns) / 1e6,
                static_cast<unsigned long long>(r.stats.throttle_events));
  }
  std::printf("    (longest wait: of the normal class, between two completions; off has no\n"
              "     budget, so its normal tasks run only before the hog starts)\n\n");

  // The normal class's share: over the whole run (start and stop included),
  // exactly over the whole periods between the first and the last period
  // end seen (the steady window), and its lowest over any window of ten
  // periods of it.
  std::printf("    normal share; configured (period - runtime) / period: %.2f%% for both budgets\n",
              100.0 * static_cast<double>((def.period - def.runtime).count()) /
                  static_cast<double>(def.period.count()));
  std::printf("    %-26s %10s %8s %10s %10s %8s %13s\n", "configuration", "whole run", "periods",
              "steady", "min of 10", "windows", "FIFO stretch");
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const outcome& r = runs[i];
    const shares& n = r.normal;
    std::printf("    %-26s %9.4f%% %8lld %10s %10s %8lld %10.1f us\n", r.name.c_str(),
                100.0 * whole_run_share(r.stats), static_cast<long long>(n.periods),
                percent_or_na(n.steady).c_str(), percent_or_na(n.min_window).c_str(),
                static_cast<long long>(n.windows),
                static_cast<double>(r.longest_stretch_ns()) / 1e3);
    if (n.unseen > 0) {
      std::printf("    %-26s (%lld of the steady window's period ends were not seen)\n", "",
                  static_cast<long long>(n.unseen));
    }
  }
  std::printf(
      "    (whole run: normal / (FIFO + normal + idle) from the worker's start to its stop;\n"
      "     steady: over the whole periods from the first period end seen to the last;\n"
      "     min of 10: the lowest over any %lld consecutive periods of it; FIFO stretch: the\n"
      "     longest FIFO task, or the most overrun counted in one period if longer)\n",
      static_cast<long long>(window_periods));

  const outcome& d = runs[1];
  const double added = static_cast<double>(percentile(d.latency_ns, 1.0) - off_max) / 1e3;
  const double want = static_cast<double>((def.period - def.runtime).count()) /
                      static_cast<double>(def.period.count());
  std::printf("    default: FIFO max added by the server at most 1 ms: %s (%.1f us)\n",
              added <= 1000.0 ? "yes" : "no", added);
  // The raw shares against the configured one, then against the bound the
  // mechanism documents for cooperative tasks (the note printed below).
  const auto bound = [&](std::int64_t periods) {
    return want - static_cast<double>(d.longest_stretch_ns()) /
                      static_cast<double>(periods * def.period.count());
  };
  const auto report = [&](const char* what, std::int64_t periods, double share) {
    std::printf("    default: %s,\n"
                "      raw %.4f%%, at least the configured %.2f%%: %s\n"
                "      at least configured - longest FIFO stretch / window = %.4f%% (the "
                "cooperative bound): %s\n",
                what, 100.0 * share, 100.0 * want, share >= want ? "yes" : "no",
                100.0 * bound(periods), share >= bound(periods) ? "yes" : "no");
  };
  if (d.normal.steady < 0) {
    std::printf("    default: normal share over the steady window: n/a (fewer than 2 period "
                "ends seen)\n");
  } else {
    report(("normal share over the " + std::to_string(d.normal.periods) +
            " whole periods of the steady window")
               .c_str(),
           d.normal.periods, d.normal.steady);
  }
  if (d.normal.windows == 0) {
    std::printf("    default: normal share over every %lld periods: n/a (no such window seen)\n",
                static_cast<long long>(window_periods));
  } else {
    report(("lowest normal share over " + std::to_string(window_periods) +
            " consecutive periods (" + std::to_string(d.normal.windows) + " windows)")
               .c_str(),
           window_periods, d.normal.min_window);
  }
  std::printf(
      "    (the cooperative bound, documented in DESIGN.md: tasks are not preempted, so a FIFO\n"
      "     task picked inside the budget runs to its end; its overrun is carried into the next\n"
      "     period as used FIFO time, so over whole periods normal work gets its share except\n"
      "     for the last period's overrun, still owed when the window ends: at most one FIFO\n"
      "     stretch between scheduling points, here one 200 us hog slice)\n");
}

// ---- (c) choosing the default period ------------------------------------

// The workload of (b) at a 95% FIFO share (the kernel's) on periods of 1,
// 10 and 100 ms, next to no budget: the FIFO task's added max latency
// against how often the budget holds FIFO back (each hold is a switch to
// the server and back). The rule: the longest period whose added max stays
// within 1 ms, since a longer period holds less often; runtime_options'
// default should be the period this picks.
void part_c(const std::string& cpus, std::chrono::milliseconds length) {
  std::printf("(c) choosing the default: the workload of (b) at a 95%% FIFO share on three periods,\n"
              "    %lld ms each\n",
              static_cast<long long>(length.count()));
  const outcome off = run_config("off", {.mode = urt::throttle_mode::off}, cpus, length);
  const std::int64_t off_max = percentile(off.latency_ns, 1.0);
  std::printf("    %-12s %9s %9s %9s %10s %9s\n", "period", "p99 us", "max us", "added us",
              "normal %", "holds/s");
  std::printf("    %-12s %9.1f %9.1f %9s %10s %9s\n", "off",
              static_cast<double>(percentile(off.latency_ns, 0.99)) / 1e3,
              static_cast<double>(off_max) / 1e3, "-", "-", "-");
  std::chrono::nanoseconds chosen{0};
  for (const std::chrono::nanoseconds period :
       {std::chrono::nanoseconds{1ms}, std::chrono::nanoseconds{10ms},
        std::chrono::nanoseconds{100ms}}) {
    const urt::bandwidth_options bw{.mode = urt::throttle_mode::deferred,
                                    .runtime = period * 95 / 100,
                                    .period = period};
    const outcome r = run_config(std::to_string(period / 1ms) + " ms", bw, cpus, length);
    const std::int64_t mx = percentile(r.latency_ns, 1.0);
    const double added_us = static_cast<double>(mx - off_max) / 1e3;
    const double holds = static_cast<double>(r.stats.throttle_events) /
                         std::chrono::duration<double>(length).count();
    std::printf("    %-12s %9.1f %9.1f %9.1f %9.2f%% %9.0f\n", r.name.c_str(),
                static_cast<double>(percentile(r.latency_ns, 0.99)) / 1e3,
                static_cast<double>(mx) / 1e3, added_us, 100.0 * r.normal.steady, holds);
    if (added_us <= 1000.0) chosen = period;
  }
  const urt::bandwidth_options def = urt::runtime_options{}.bandwidth;
  if (chosen.count() == 0) {
    std::printf("    no period kept the added max within 1 ms in this run\n\n");
  } else {
    std::printf("    longest period with the added max within 1 ms: %lld ms; the default's: %lld ms "
                "(%s)\n\n",
                static_cast<long long>(chosen / 1ms), static_cast<long long>(def.period / 1ms),
                chosen == def.period ? "agrees" : "differs");
  }
}

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: urt-bandwidth-bench [--part=a|b|c|ab|abc...] [--rounds=N] [--iterations=N]\n"
      "                           [--seconds=S] [--cpus=CPU]\n"
      "  --part        which parts to run (default ab; c chooses the default period)\n"
      "  --rounds      interleaved rounds of (a) (default 5)\n"
      "  --iterations  task switches per thread per round of (a) (default 2000000)\n"
      "  --seconds     length of each configuration of (b) (default 3; the kernel-like\n"
      "                period is 1 s)\n"
      "  --cpus        run (b) on this one real CPU, pinned (default: a synthetic worker)\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "ab";
  unsigned rounds = 5;
  std::uint64_t iterations = 2'000'000;
  long seconds = 3;
  std::string cpus;
  const option longs[] = {{"part", required_argument, nullptr, 'p'},
                          {"rounds", required_argument, nullptr, 'r'},
                          {"iterations", required_argument, nullptr, 'i'},
                          {"seconds", required_argument, nullptr, 's'},
                          {"cpus", required_argument, nullptr, 'c'},
                          {"help", no_argument, nullptr, 'h'},
                          {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "h", longs, nullptr)) != -1;) {
    switch (c) {
      case 'p': part = optarg; break;
      case 'r': rounds = static_cast<unsigned>(std::strtoul(optarg, nullptr, 10)); break;
      case 'i': iterations = std::strtoull(optarg, nullptr, 10); break;
      case 's': seconds = std::strtol(optarg, nullptr, 10); break;
      case 'c': cpus = optarg; break;
      case 'h': usage(0);
      default: usage(2);
    }
  }
  if (rounds == 0 || rounds > 1000 || iterations == 0 || iterations > 1'000'000'000 ||
      seconds <= 0 || seconds > 3600 || part.empty() ||
      part.find_first_not_of("abc") != std::string::npos) {
    std::fprintf(stderr, "urt-bandwidth-bench: --rounds 1..1000, --iterations 1..1e9, "
                         "--seconds 1..3600, --part: letters of abc\n");
    return 2;
  }
  if (part.find('a') != std::string::npos) part_a(rounds, iterations);
  if (part.find('b') != std::string::npos) part_b(cpus, std::chrono::seconds{seconds});
  if (part.find('c') != std::string::npos) part_c(cpus, std::chrono::seconds{seconds});
  return 0;
}
