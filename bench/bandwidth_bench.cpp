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
//     class's share and its longest wait between two completions.
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

struct shared_budget {
  urt::detail::spinlock lock;
  bandwidth bw{urt::bandwidth_options{}, clock::now()};
};

enum class variant { clock_only, per_worker, global_lock };

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
  std::printf("(a) budget accounting per FIFO task switch (clock read included), ns, median of %u "
              "interleaved rounds, %u CPUs,\n    thread t pinned to the (t mod %u)-th of them\n",
              rounds, cpus, cpus);
  std::printf("    %-24s %9s %11s %12s %10s %16s\n", "threads", "clock", "per_worker",
              "global_lock", "ratio", "ratio past clock");
  double ratio_at_2 = 0;
  for (const unsigned threads : {1U, 2U, 4 * cpus}) {
    std::vector<double> clk, per, glob;
    for (unsigned r = 0; r < rounds; ++r) {
      clk.push_back(run_accounting(variant::clock_only, threads, iterations, allowed));
      per.push_back(run_accounting(variant::per_worker, threads, iterations, allowed));
      glob.push_back(run_accounting(variant::global_lock, threads, iterations, allowed));
    }
    const double c = median(clk);
    const double p = median(per);
    const double g = median(glob);
    // Noise can put a variant below the clock-only loop: then no ratio.
    const double past = g - c > 1.0 ? (p - c) / (g - c) : -1.0;
    std::string label = std::to_string(threads);
    if (threads > cpus) label += " (oversubscribed)";
    std::printf("    %-24s %9.1f %11.1f %12.1f %10.3f %16s\n", label.c_str(), c, p, g, p / g,
                past < 0 ? "n/a (noise)" : std::to_string(past).substr(0, 6).c_str());
    if (threads == 2) ratio_at_2 = past;
  }
  std::printf("    (ratio past clock: the cost beyond the one clock read per switch that any\n"
              "     accounting needs, per_worker / global_lock)\n");
  if (pin_failed.load()) {
    std::printf("    warning: the OS refused to pin some threads; they ran unpinned\n");
  }
  std::printf("    per_worker at most 1/10 of global_lock at 2 threads, past the clock read: %s "
              "(%.3f)\n\n",
              ratio_at_2 >= 0 && ratio_at_2 <= 0.1 ? "yes" : "no", ratio_at_2);
}

// ---- (b) blackout and starvation ----------------------------------------

void spin_for(std::chrono::nanoseconds d) {
  const auto until = clock::now() + d;
  while (clock::now() < until) {
  }
}

struct outcome {
  std::string name;
  std::vector<std::int64_t> latency_ns;
  std::int64_t longest_normal_wait_ns = 0;
  std::uint64_t normal_runs = 0;
  urt::worker_stats stats;
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
    std::function<void()> after;
    void start() {
      rt.spawn({.priority = priority}, [this] {
        spin_for(slice);
        after();
        if (!stop.load(std::memory_order_relaxed)) start();
      });
    }
  };
  const auto now_ns = [] { return clock::now().time_since_epoch().count(); };
  chain hog{rt, 50, 200us, stop, [] {}};
  chain normal{rt, urt::priority_normal, 100us, stop, [&] {
                 const std::int64_t t = now_ns();
                 if (last_normal != 0) longest = std::max(longest, t - last_normal);
                 last_normal = t;
                 ++normal_runs;
               }};
  const auto start = clock::now() + 10ms;
  urt::periodic_task periodic = rt.every(1ms, {.priority = 90}, [&] {
    latency.push_back((clock::now() - urt::this_task::release_time()).count());
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
  return out;
}

std::int64_t percentile(std::vector<std::int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
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
  std::printf("    %-26s %9s %9s %9s %11s %13s %8s\n", "configuration", "p99 us", "max us",
              "added us", "normal %", "longest wait", "holds");
  for (const outcome& r : runs) {
    const double p99 = static_cast<double>(percentile(r.latency_ns, 0.99)) / 1e3;
    const std::int64_t mx = percentile(r.latency_ns, 1.0);
    const double busy = static_cast<double>(r.stats.fifo_ns + r.stats.normal_ns + r.stats.idle_ns);
    const double share = busy > 0 ? 100.0 * static_cast<double>(r.stats.normal_ns) / busy : 0.0;
    std::printf("    %-26s %9.1f %9.1f %9.1f %10.2f%% %10.1f ms %8llu\n", r.name.c_str(), p99,
                static_cast<double>(mx) / 1e3, static_cast<double>(mx - off_max) / 1e3, share,
                static_cast<double>(r.longest_normal_wait_ns) / 1e6,
                static_cast<unsigned long long>(r.stats.throttle_events));
  }
  std::printf("    (off accounts nothing: its normal share is shown as 0; its normal tasks run only\n"
              "     before the hog starts)\n");
  const double added = static_cast<double>(percentile(runs[1].latency_ns, 1.0) - off_max) / 1e3;
  const double want = 100.0 * static_cast<double>((def.period - def.runtime).count()) /
                      static_cast<double>(def.period.count());
  const double busy1 = static_cast<double>(runs[1].stats.fifo_ns + runs[1].stats.normal_ns +
                                           runs[1].stats.idle_ns);
  const double got = busy1 > 0 ? 100.0 * static_cast<double>(runs[1].stats.normal_ns) / busy1 : 0;
  std::printf("    default: FIFO max added by the server at most 1 ms: %s (%.1f us)\n",
              added <= 1000.0 ? "yes" : "no", added);
  std::printf("    default: normal share at least the configured %.1f%%: %s (%.2f%%)\n", want,
              got >= want ? "yes" : "no", got);
}

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: urt-bandwidth-bench [--part=a|b|ab] [--rounds=N] [--iterations=N]\n"
      "                           [--seconds=S] [--cpus=CPU]\n"
      "  --part        which parts to run (default ab)\n"
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
      seconds <= 0 || seconds > 3600 || (part != "a" && part != "b" && part != "ab")) {
    std::fprintf(stderr, "urt-bandwidth-bench: --rounds 1..1000, --iterations 1..1e9, "
                         "--seconds 1..3600, --part a|b|ab\n");
    return 2;
  }
  if (part.find('a') != std::string::npos) part_a(rounds, iterations);
  if (part.find('b') != std::string::npos) part_b(cpus, std::chrono::seconds{seconds});
  return 0;
}
