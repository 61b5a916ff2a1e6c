// urt-migration-bench: the migration modes side by side on a cyclictest-like
// scenario (a benchmark, not a test).
//
// Scenario, per segment: `--tasks` periodic tasks at priority 80 (period
// `--period-us`, spread by placement) measure their wake-up latency (start -
// release time, as cyclictest does), while a hog at priority 90 pinned to
// worker 0 runs `--hog-us` out of every period, so that releases due on
// worker 0 queue behind it and that worker is overloaded. The hog reaches a
// scheduling point (urt::preempt_point) every `--hog-step-us`, or never with
// --hog-step-us=0 (a stuck worker: only the ipi_timeout fallback moves work
// off it). Segments of each mode (push_ipi, pull, none) are interleaved so
// that machine noise hits all of them; every `--ipi-timeout-us` value gets
// its own push_ipi column.
//
// Each segment ends with a burst: `--burst` tasks at priority 20 spawned
// from this thread, each of which spawns three at 30 from its worker (work
// that fans out, every worker lowering and overloaded by turns), timed from
// the first spawn until stop(drain) returns.
//
// `--spinners N` adds N threads of the application that spin through every
// segment, unpinned, SCHED_OTHER (a busy-polling thread beside the pool, as
// users run them): the workers share their CPUs with them.
//
// Printed per mode: releases, latency p50/p99/p99.9/max (us), and per second
// the pushes, pulls, remote queue-lock acquisitions, doorbells sent, token
// hops and fallbacks; the bursts' drain times (median and slowest, ms); then
// ratios against pull.
#include <getopt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stats.hpp"
#include "urt/urt.hpp"

namespace {

using namespace std::chrono_literals;
using urt_cyclictest::latency_stats;

struct config {
  std::string cpus;  // empty: every allowed PU
  int tasks = 0;     // 0: two per worker
  std::chrono::microseconds period{1000};
  std::chrono::microseconds hog{400};
  std::chrono::microseconds hog_step{20};
  std::chrono::milliseconds segment{1000};
  int segments = 3;
  // Default: the runtime's own default.
  std::vector<std::chrono::microseconds> ipi_timeouts{
      std::chrono::duration_cast<std::chrono::microseconds>(urt::runtime_options{}.ipi_timeout)};
  bool fifo = false;
  int burst = 2000;  // tasks at 20, each spawning three at 30
  int spinners = 0;
  urt::worker_binding binding = urt::worker_binding::pu;
};

struct mode_run {
  std::string name;
  urt::migration_mode mode = urt::migration_mode::push_ipi;
  std::chrono::microseconds ipi_timeout =  // unused by pull and none, but validated
      std::chrono::duration_cast<std::chrono::microseconds>(urt::runtime_options{}.ipi_timeout);
  // Summed over segments.
  std::vector<std::uint64_t> histogram{};  // 1 us buckets
  std::uint64_t overflows = 0;
  std::int64_t max_us = 0;
  std::uint64_t releases = 0;
  urt::worker_stats counters{};
  double seconds = 0;
  std::vector<double> burst_ms{};  // one per segment
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "urt-migration-bench: %s\n"
               "usage: urt-migration-bench [--cpus LIST] [--tasks N] [--period-us US]\n"
               "       [--hog-us US] [--hog-step-us US (0: never yields)] [--segment-ms MS]\n"
               "       [--segments N] [--ipi-timeout-us US[,US...]] [--fifo] [--burst N]\n"
               "       [--spinners N] [--binding pu|llc|workers]\n",
               why);
  std::exit(2);
}

long parse_number(const char* flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    usage((std::string(flag) + ": '" + text + "' is not a number in " + std::to_string(lo) +
           ".." + std::to_string(hi))
              .c_str());
  }
  return v;
}

config parse(int argc, char** argv) {
  config c;
  static const option longs[] = {{"cpus", required_argument, nullptr, 'a'},
                                 {"tasks", required_argument, nullptr, 't'},
                                 {"period-us", required_argument, nullptr, 'p'},
                                 {"hog-us", required_argument, nullptr, 'h'},
                                 {"hog-step-us", required_argument, nullptr, 's'},
                                 {"segment-ms", required_argument, nullptr, 'm'},
                                 {"segments", required_argument, nullptr, 'n'},
                                 {"ipi-timeout-us", required_argument, nullptr, 'i'},
                                 {"fifo", no_argument, nullptr, 'f'},
                                 {"burst", required_argument, nullptr, 'b'},
                                 {"spinners", required_argument, nullptr, 'w'},
                                 {"binding", required_argument, nullptr, 'g'},
                                 {nullptr, 0, nullptr, 0}};
  for (int opt; (opt = getopt_long(argc, argv, "", longs, nullptr)) != -1;) {
    switch (opt) {
      case 'a':
        c.cpus = optarg;
        break;
      case 't':
        c.tasks = static_cast<int>(parse_number("--tasks", optarg, 1, 1000));
        break;
      case 'p':
        c.period = std::chrono::microseconds{parse_number("--period-us", optarg, 100, 1000000)};
        break;
      case 'h':
        c.hog = std::chrono::microseconds{parse_number("--hog-us", optarg, 0, 1000000)};
        break;
      case 's':
        c.hog_step = std::chrono::microseconds{parse_number("--hog-step-us", optarg, 0, 1000000)};
        break;
      case 'm':
        c.segment = std::chrono::milliseconds{parse_number("--segment-ms", optarg, 10, 600000)};
        break;
      case 'n':
        c.segments = static_cast<int>(parse_number("--segments", optarg, 1, 1000));
        break;
      case 'i': {
        c.ipi_timeouts.clear();
        std::string list = optarg;
        for (std::size_t at = 0; at <= list.size();) {
          const std::size_t comma = std::min(list.find(',', at), list.size());
          const std::string item = list.substr(at, comma - at);
          c.ipi_timeouts.emplace_back(parse_number("--ipi-timeout-us", item.c_str(), 1, 1000000));
          at = comma + 1;
        }
        break;
      }
      case 'f':
        c.fifo = true;
        break;
      case 'b':
        c.burst = static_cast<int>(parse_number("--burst", optarg, 0, 1000000));
        break;
      case 'w':
        c.spinners = static_cast<int>(parse_number("--spinners", optarg, 0, 64));
        break;
      case 'g': {
        const std::string b = optarg;
        if (b == "pu") {
          c.binding = urt::worker_binding::pu;
        } else if (b == "llc") {
          c.binding = urt::worker_binding::llc;
        } else if (b == "workers") {
          c.binding = urt::worker_binding::workers;
        } else {
          usage(("--binding: '" + b + "' is not pu, llc or workers").c_str());
        }
        break;
      }
      default:
        usage("unknown flag");
    }
  }
  if (optind != argc) usage((std::string("unexpected argument '") + argv[optind] + "'").c_str());
  if (c.hog >= c.period) usage("--hog-us must be below --period-us");
  return c;
}

void spin_for(std::chrono::microseconds d, std::chrono::microseconds step) {
  const auto end = urt::clock::now() + d;
  auto next_point = urt::clock::now() + step;
  while (urt::clock::now() < end) {
    if (step.count() > 0 && urt::clock::now() >= next_point) {
      urt::preempt_point();  // a scheduling point: releases, pushes, token
      next_point += step;
    }
  }
}

void run_segment(const config& c, mode_run& run) {
  urt::runtime_options o;
  o.cpus = c.cpus;
  o.migration = run.mode;
  o.ipi_timeout = run.ipi_timeout;
  o.binding = c.binding;
  if (c.fifo) {
    o.policy = urt::worker_policy::fifo;
    o.fifo_priority = 80;
  }
  std::atomic<bool> spinning{true};
  std::vector<std::thread> spinners;
  for (int i = 0; i < c.spinners; ++i) {
    spinners.emplace_back([&spinning] {
      while (spinning.load(std::memory_order_relaxed)) {
      }
    });
  }
  urt::runtime rt(o);
  const auto workers = static_cast<unsigned>(rt.worker_count());
  const int tasks = c.tasks > 0 ? c.tasks : static_cast<int>(2 * workers);
  std::vector<std::unique_ptr<latency_stats>> stats;
  for (int i = 0; i < tasks; ++i) stats.push_back(std::make_unique<latency_stats>(10000));
  const auto start = urt::clock::now() + 20ms;
  std::vector<urt::periodic_task> series;
  // The hog first, then the measured tasks, each offset by a slice of the
  // period so that their releases do not all coincide.
  series.push_back(rt.every(
      c.period, urt::task_spec{.priority = 90, .affinity = urt::worker_set{0}},
      [&c] { spin_for(c.hog, c.hog_step); }, start));
  for (int i = 0; i < tasks; ++i) {
    latency_stats* s = stats[static_cast<std::size_t>(i)].get();
    const auto offset = c.period * (i + 1) / (tasks + 1);
    series.push_back(rt.every(
        c.period, urt::task_spec{.priority = 80},
        [s] { s->record((urt::clock::now() - urt::this_task::release_time()).count()); },
        start + offset));
  }
  const urt::runtime_stats before = rt.stats();
  std::this_thread::sleep_until(start + c.segment);
  for (auto& p : series) p.cancel();
  const urt::runtime_stats after = rt.stats();
  const auto burst_start = std::chrono::steady_clock::now();
  for (int i = 0; i < c.burst; ++i) {
    rt.spawn({.priority = 20}, [&rt] {
      for (int k = 0; k < 3; ++k) rt.spawn({.priority = 30}, [] {});
    });
  }
  rt.stop();
  run.burst_ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - burst_start)
          .count());
  spinning.store(false);
  for (auto& t : spinners) t.join();
  const urt::worker_stats b = before.total();
  const urt::worker_stats a = after.total();
  run.counters.pushes += a.pushes - b.pushes;
  run.counters.pulls += a.pulls - b.pulls;
  run.counters.remote_locks += a.remote_locks - b.remote_locks;
  run.counters.doorbells_sent += a.doorbells_sent - b.doorbells_sent;
  run.counters.token_hops += a.token_hops - b.token_hops;
  run.counters.fallbacks += a.fallbacks - b.fallbacks;
  run.seconds += std::chrono::duration<double>(c.segment).count();
  for (auto& s : stats) {
    const auto h = s->histogram();
    if (run.histogram.size() < h.size()) run.histogram.resize(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) run.histogram[i] += h[i];
    run.overflows += s->overflows();
    run.max_us = std::max(run.max_us, s->max_us());
    run.releases += s->cycles();
  }
}

std::int64_t pct(const mode_run& r, double q) {
  return urt_cyclictest::percentile_us(r.histogram, r.overflows, r.max_us, q);
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  std::vector<mode_run> runs;
  for (auto t : c.ipi_timeouts) {
    runs.push_back(mode_run{.name = "push_ipi/" + std::to_string(t.count()) + "us",
                            .mode = urt::migration_mode::push_ipi,
                            .ipi_timeout = t});
  }
  runs.push_back(mode_run{.name = "pull", .mode = urt::migration_mode::pull});
  runs.push_back(mode_run{.name = "none", .mode = urt::migration_mode::none});
  try {
    for (int seg = 0; seg < c.segments; ++seg) {
      for (auto& r : runs) run_segment(c, r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "urt-migration-bench: %s\n", e.what());
    return 1;
  }
  std::printf(
      "urt-migration-bench: %d segments x %lld ms per mode, period %lld us, hog %lld us "
      "at 90 on worker 0 (preempt point every %lld us%s), tasks at 80%s; a burst of %d "
      "tasks at 20 each spawning 3 at 30 per segment; %d spinning application "
      "thread(s); binding %s\n",
      c.segments, static_cast<long long>(c.segment.count()),
      static_cast<long long>(c.period.count()), static_cast<long long>(c.hog.count()),
      static_cast<long long>(c.hog_step.count()), c.hog_step.count() == 0 ? ": never" : "",
      c.fifo ? ", SCHED_FIFO workers" : "", c.burst, c.spinners,
      c.binding == urt::worker_binding::pu    ? "pu"
      : c.binding == urt::worker_binding::llc ? "llc"
                                              : "workers");
  std::printf("%-16s %9s %6s %6s %7s %7s %9s %9s %11s %10s %9s %9s %14s\n", "mode", "releases",
              "p50us", "p99us", "p99.9us", "max_us", "pushes/s", "pulls/s", "rlocks/s", "bells/s",
              "hops/s", "fallbk/s", "burst ms p50/max");
  const mode_run* pull = nullptr;
  for (const auto& r : runs) {
    if (r.mode == urt::migration_mode::pull) pull = &r;
    const auto per_s = [&](std::uint64_t v) { return static_cast<double>(v) / r.seconds; };
    std::vector<double> burst = r.burst_ms;
    std::sort(burst.begin(), burst.end());
    std::printf(
        "%-16s %9llu %6lld %6lld %7lld %7lld %9.0f %9.0f %11.0f %10.0f %9.0f %9.0f %7.1f/%.1f\n",
        r.name.c_str(), static_cast<unsigned long long>(r.releases),
        static_cast<long long>(pct(r, 0.5)), static_cast<long long>(pct(r, 0.99)),
        static_cast<long long>(pct(r, 0.999)), static_cast<long long>(r.max_us),
        per_s(r.counters.pushes), per_s(r.counters.pulls), per_s(r.counters.remote_locks),
        per_s(r.counters.doorbells_sent), per_s(r.counters.token_hops), per_s(r.counters.fallbacks),
        burst[burst.size() / 2], burst.back());
  }
  if (pull != nullptr) {
    std::printf("\nratios against pull (lower is better):\n");
    for (const auto& r : runs) {
      if (r.mode != urt::migration_mode::push_ipi) continue;
      const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
      std::vector<double> mine = r.burst_ms;
      std::vector<double> theirs = pull->burst_ms;
      std::sort(mine.begin(), mine.end());
      std::sort(theirs.begin(), theirs.end());
      std::printf("  %-16s p99 %.2fx  max %.2fx  remote locks %.2fx  burst p50 %.2fx\n",
                  r.name.c_str(),
                  ratio(static_cast<double>(pct(r, 0.99)), static_cast<double>(pct(*pull, 0.99))),
                  ratio(static_cast<double>(r.max_us), static_cast<double>(pull->max_us)),
                  ratio(static_cast<double>(r.counters.remote_locks),
                        static_cast<double>(pull->counters.remote_locks)),
                  ratio(mine[mine.size() / 2], theirs[theirs.size() / 2]));
    }
  }
  return 0;
}
