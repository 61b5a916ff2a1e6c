// urt-cyclictest: cyclictest's measurement on urt periodic tasks. Each
// measuring "thread" is a drift-free urt::runtime::every() series pinned to
// (or placed on) one worker; latency = clock::now() at task entry -
// this_task::release_time(). The series records into preallocated stats
// (no allocation, no I/O per release); the main thread prints.
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "urt/urt.hpp"

#ifndef URT_CYCLICTEST_VERSION
#define URT_CYCLICTEST_VERSION "0"
#endif

namespace {

using namespace std::chrono_literals;
using namespace urt_cyclictest;

volatile std::sig_atomic_t g_signalled = 0;
extern "C" void on_signal(int /*sig*/) { g_signalled = 1; }

/// Histogram buckets when no -h is given (10 ms): latency_stats' exact range.
constexpr std::size_t default_buckets = latency_stats::exact_buckets;

/// What the measuring threads share: cyclictest's shutdown flag, its -b
/// break record and its --spike list. Written by the tasks without locks
/// or allocation; the main thread reads the records once the workers are
/// joined.
struct run_control {
  /// cyclictest's `shutdown`: set by the -b thread, by a thread done with
  /// -l under -M, and by the main thread when the run ends. A thread takes
  /// the sample of the wake-up it was waiting for when it was set (as
  /// cyclictest's threads check it only before they sleep), then stops.
  std::atomic<bool> shutdown{false};
  bool end_on_finish = false;      ///< -M: a thread done with -l sets shutdown (cyclictest's out:)
  std::int64_t breaktrace = 0;     ///< -b (reported unit); 0 = off
  std::atomic<bool> broke{false};  ///< a latency exceeded -b (the first one is recorded)
  std::atomic<int> break_tid{0};
  std::atomic<std::int64_t> break_value{0};
  std::int64_t spike = 0;              ///< --spike (reported unit); 0 = off
  std::vector<spike_record> spikes;    ///< --spike-nodes slots, claimed in order
  std::atomic<std::uint64_t> spike_count{0};  ///< spikes seen, kept or not

  void record_spike(unsigned thread, std::int64_t value, urt::clock::time_point now) noexcept {
    const std::uint64_t slot = spike_count.fetch_add(1, std::memory_order_relaxed);
    if (slot < spikes.size()) {
      spikes[slot] = {.thread = thread,
                      .value = value,
                      .time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                     now.time_since_epoch())
                                     .count()};
    }
  }
};

/// One measuring thread: its stats and the handle its task cancels itself
/// through once it stops (-l loops recorded, -b exceeded, or the sample
/// after shutdown taken).
struct measured {
  measured(unsigned index_, std::size_t buckets, std::size_t outliers, latency_unit unit,
           std::uint64_t loops_, run_control& ctl_, bool verbose)
      : stats(buckets, outliers, unit), index(index_), loops(loops_), ctl(&ctl_) {
    if (verbose) ring = std::make_unique<std::atomic<std::int64_t>[]>(verbose_ring);
  }
  latency_stats stats;
  unsigned index;
  std::uint64_t loops;
  run_control* ctl;
  std::atomic<urt::periodic_task*> handle{nullptr};
  // Its worker's, set before its series starts (a series never migrates).
  std::atomic<int> tid{0};
  std::atomic<int> worker{-1};
  std::atomic<bool> finished{false};
  /// -v: the latest values (reported unit), cycle c at c % verbose_ring;
  /// one writer (this thread's task), one reader (the main thread,
  /// take_samples). A seqlock per slot: `writing` is cycles whose slot
  /// store may have begun, `published` cycles whose value is written. The
  /// reader may race with a write to the slot it reads; it then sees
  /// writing - read > verbose_ring and counts the sample lost.
  std::unique_ptr<std::atomic<std::int64_t>[]> ring;
  std::atomic<std::uint64_t> writing{0};
  std::atomic<std::uint64_t> published{0};

  void cancel_self() noexcept {
    // Pairs with main's release store of `handle` once every() returned it.
    if (urt::periodic_task* h = handle.load(std::memory_order_acquire)) h->cancel();
  }
  void finish() noexcept {
    // Pairs with main's acquire loads of `finished` in its end-of-run wait:
    // this thread's stats are complete.
    finished.store(true, std::memory_order_release);
    // Pairs with the acquire loads of `shutdown` in release() and in main's
    // stopping().
    if (ctl->end_on_finish) ctl->shutdown.store(true, std::memory_order_release);
    cancel_self();
  }
  // Runs on the worker at every release.
  void release(urt::clock::time_point now, urt::clock::time_point due) noexcept {
    if (finished.load(std::memory_order_relaxed)) {  // the handle was not set yet when it stopped
      cancel_self();
      return;
    }
    // Pairs with the release stores of `shutdown` (finish(), -b below, main).
    const bool last = ctl->shutdown.load(std::memory_order_acquire);
    const std::uint64_t done = stats.cycles();
    const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - due).count();
    stats.record(ns);
    const int my_tid = tid.load(std::memory_order_relaxed);
    const std::int64_t value = in_unit(ns, stats.unit());
    if (ring) {
      writing.store(done + 1, std::memory_order_relaxed);
      // Pairs with take_samples' acquire fence: a reader that loads this
      // slot's new value then sees `writing` at done + 1 or later.
      std::atomic_thread_fence(std::memory_order_release);
      ring[done % verbose_ring].store(value, std::memory_order_relaxed);
      // Pairs with take_samples' acquire load of `published`: the values
      // of the cycles below done + 1 are written.
      published.store(done + 1, std::memory_order_release);
    }
    // cyclictest: "if (trigger && (diff > trigger))", "diff > tracelimit".
    if (ctl->spike != 0 && value > ctl->spike) ctl->record_spike(index, value, now);
    bool stop = last;
    if (ctl->breaktrace != 0 && value > ctl->breaktrace) {
      bool first = false;
      // Only the first thread past -b records; relaxed is enough, since the
      // main thread reads the record after the workers are joined.
      if (ctl->broke.compare_exchange_strong(first, true, std::memory_order_relaxed)) {
        ctl->break_tid.store(my_tid, std::memory_order_relaxed);
        ctl->break_value.store(value, std::memory_order_relaxed);
      }
      ctl->shutdown.store(true, std::memory_order_release);  // pairs as in finish()
      stop = true;
    }
    if (loops != 0 && done + 1 >= loops) stop = true;
    if (stop) finish();
  }
};

/// -v: what the main thread has printed of one thread, and cyclictest's
/// -o reduction state.
struct verbose_reader {
  std::uint64_t read = 0;      ///< cycles printed or skipped
  std::uint64_t reduce = 0;    ///< samples in the current -o group
  std::int64_t redmax = 0;     ///< the group's max...
  std::uint64_t cycleofmax = 0;  ///< ...and its cycle
  std::uint64_t lost = 0;      ///< overwritten in the ring before they were printed
};

/// Appends to `out` the -v lines of `m`'s samples not printed yet.
void take_samples(const measured& m, verbose_reader& r, std::uint64_t oscope, std::string& out) {
  // Pairs with measured::release's release store of `published`.
  const std::uint64_t published = m.published.load(std::memory_order_acquire);
  for (; r.read < published; ++r.read) {
    if (published - r.read > verbose_ring) {  // overwritten before this look
      r.lost += published - verbose_ring - r.read;
      r.read = published - verbose_ring;
    }
    const std::int64_t value = m.ring[r.read % verbose_ring].load(std::memory_order_relaxed);
    // Overwritten while being read: the writer got a whole ring ahead. The
    // fence pairs with measured::release's release fence before its slot
    // store: a value from cycle read + verbose_ring or later implies
    // `writing` above read + verbose_ring here. (`published` is stored after
    // the slot, so it could still lag: it cannot tell.)
    std::atomic_thread_fence(std::memory_order_acquire);
    if (m.writing.load(std::memory_order_relaxed) - r.read > verbose_ring) {
      ++r.lost;
      continue;
    }
    // cyclictest's reduction: the max of every `oscope` samples and its
    // cycle (the first sample of a group is taken as it is, so that a 0
    // latency names its own cycle).
    if (r.reduce == 0 || value > r.redmax) {
      r.redmax = value;
      r.cycleofmax = r.read;
    }
    if (++r.reduce == oscope) {
      out += format_verbose_line(m.index, r.cycleofmax, r.redmax);
      r.reduce = 0;
    }
  }
}

/// --load: tasks that spin ~100 us and respawn themselves on their worker.
struct load_context {
  urt::runtime* rt = nullptr;
  std::vector<urt::task_spec> specs;  // per worker (a worker_set is too big to capture inline)
  std::atomic<bool> running{true};
  std::atomic<std::uint64_t> runs{0};
};

struct load_task {
  load_context* ctx;
  unsigned worker;
  void operator()() const {
    const auto end = urt::clock::now() + 100us;
    while (urt::clock::now() < end && ctx->running.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    ctx->runs.fetch_add(1, std::memory_order_relaxed);
    if (!ctx->running.load(std::memory_order_relaxed)) return;
    try {
      ctx->rt->spawn(ctx->specs[worker], load_task{ctx, worker});
    } catch (const std::exception&) {
      // The runtime is stopping: the load ends with it.
    }
  }
};

/// cyclictest's /dev/cpu_dma_latency trick: the PM QoS request holds while
/// the fd is open (at 0 us CPUs stay out of deep C-states), so that both
/// tools run under the same PM QoS. --latency sets the value, --laptop
/// skips it, with cyclictest's messages.
int set_latency_target(const options& o) {
  if (o.laptop) {
    // cyclictest's two warnings (--default-system's wins when both are given).
    std::fprintf(stderr, o.default_system ? "WARN: not setting cpu_dma_latency from cyclictest\n"
                                          : "WARN: not setting cpu_dma_latency to save battery "
                                            "power\n");
    return -1;
  }
  const int fd = ::open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "# WARN: open /dev/cpu_dma_latency: %s\n", std::strerror(errno));
    return -1;
  }
  const std::int32_t value = o.latency_target_us;
  if (::write(fd, &value, sizeof value) < 1) {
    std::fprintf(stderr, "# error setting cpu_dma_latency to %d: %s\n", static_cast<int>(value),
                 std::strerror(errno));
    ::close(fd);
    return -1;
  }
  std::printf("# /dev/cpu_dma_latency set to %dus\n", static_cast<int>(value));
  return fd;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string line;
  std::getline(f, line);
  return line;
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "urt-cyclictest: %s\n\n%s", message.c_str(), usage().c_str());
  std::exit(2);
}

struct file_closer {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using output_file = std::unique_ptr<std::FILE, file_closer>;

/// Opens `path` for writing (truncating it) for `flag`, before the run, so
/// that a path that cannot be written is reported at once (exit 2) instead
/// of after the whole measurement.
output_file open_output(const char* flag, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    usage_error(std::string(flag) + ": '" + path +
                "' cannot be opened for writing: " + std::strerror(errno));
  }
  return output_file(f);
}

/// Writes `text` to `f` and closes it; false when either fails.
bool write_and_close(output_file f, const std::string& text) {
  const bool written = std::fputs(text.c_str(), f.get()) >= 0;
  return std::fclose(f.release()) == 0 && written;
}

std::int64_t whole_us(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

/// The FIFO budget's settings (--throttle, --bandwidth) and its counters
/// summed over the workers (all 0 under --throttle=off).
std::string bandwidth_json(const urt::bandwidth_options& bw, const urt::worker_stats& total) {
  const auto field = [](const char* name, std::uint64_t v) {
    return std::string(", \"") + name + "\": " + std::to_string(v);
  };
  std::string s = "{\"mode\": " + json_string(name_of(throttle_spellings, bw.mode));
  s += ", \"runtime_us\": " + std::to_string(whole_us(bw.runtime));
  s += ", \"period_us\": " + std::to_string(whole_us(bw.period));
  s += field("fifo_ns", total.fifo_ns);
  s += field("normal_ns", total.normal_ns);
  s += field("idle_ns", total.idle_ns);
  s += field("throttle_events", total.throttle_events);
  s += field("throttled_ns", total.throttled_ns);
  s += field("server_slices", total.server_slices);
  s += field("overrun_ns", total.overrun_ns);
  s += field("overrun_events", total.overrun_events);
  return s + "}";
}

/// The summary's line for the budget: its settings, the share of each
/// class in the time the workers accounted, and how often FIFO was held.
std::string bandwidth_line(const urt::bandwidth_options& bw, const urt::worker_stats& t) {
  std::string s = "# bandwidth: " + std::string(name_of(throttle_spellings, bw.mode));
  if (bw.mode == urt::throttle_mode::off) return s;
  s += " " + std::to_string(whole_us(bw.runtime)) + "/" + std::to_string(whole_us(bw.period)) +
       " us";
  const double all = static_cast<double>(t.fifo_ns + t.normal_ns + t.idle_ns);
  const auto pct = [&](std::uint64_t v) {
    return all > 0 ? 100.0 * static_cast<double>(v) / all : 0.0;
  };
  char buf[256];
  std::snprintf(buf, sizeof buf,
                ": FIFO %.1f%%, normal %.1f%%, idle %.1f%%; held %llu times (%.1f ms), %llu "
                "server slices, overrun %.1f us in %llu tasks",
                pct(t.fifo_ns), pct(t.normal_ns), pct(t.idle_ns),
                static_cast<unsigned long long>(t.throttle_events),
                static_cast<double>(t.throttled_ns) / 1e6,
                static_cast<unsigned long long>(t.server_slices),
                static_cast<double>(t.overrun_ns) / 1e3,
                static_cast<unsigned long long>(t.overrun_events));
  return s + buf;
}

/// Releases counted in a per_cid, summed over its IDs.
std::uint64_t counted(const urt::per_cid<std::uint64_t>& counts) {
  std::uint64_t n = 0;
  counts.for_each([&](unsigned, const std::uint64_t& v) { n += v; });
  return n;
}

/// --cid: the measuring group's concurrency-ID counters; "null" without --cid.
std::string cid_json(const std::optional<urt::concurrency_id_mode>& mode,
                     const urt::group_stats* g, const urt::per_cid<std::uint64_t>* counts) {
  if (!mode || g == nullptr || counts == nullptr) return "null";
  std::string s = "{\"mode\": " + json_string(name_of(cid_spellings, *mode));
  s += ", \"allocated\": " + std::to_string(g->cids_allocated);
  s += ", \"reclaimed\": " + std::to_string(g->cids_reclaimed);
  s += ", \"released\": " + std::to_string(g->cids_released);
  s += ", \"in_use\": " + std::to_string(g->cids_in_use);
  s += ", \"highest\": " + std::to_string(g->highest_cid);
  s += ", \"ids_used\": " + std::to_string(counts->size());
  s += ", \"releases_counted\": " + std::to_string(counted(*counts));
  s += ", \"steps\": " + std::to_string(g->cid_steps);
  s += ", \"step_ns_histogram\": [";
  for (unsigned b = 0; b < urt::cid_step_buckets; ++b) {
    s += (b == 0 ? "" : ", ") + std::to_string(g->cid_step_ns[b]);
  }
  return s + "]}";
}

/// The summary's line for --cid.
std::string cid_line(urt::concurrency_id_mode mode, const urt::group_stats& g,
                     const urt::per_cid<std::uint64_t>& counts) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "# cid: %s: %zu IDs used, highest now %d, %llu allocated, %llu reclaimed, %llu "
                "given back; %llu compaction steps; %llu releases counted",
                std::string(name_of(cid_spellings, mode)).c_str(), counts.size(), g.highest_cid,
                static_cast<unsigned long long>(g.cids_allocated),
                static_cast<unsigned long long>(g.cids_reclaimed),
                static_cast<unsigned long long>(g.cids_released),
                static_cast<unsigned long long>(g.cid_steps),
                static_cast<unsigned long long>(counted(counts)));
  return buf;
}

/// The "urt" object's members besides "threads" (see json_header::urt_members).
std::string urt_json(const options& o, const urt::runtime_options& ro, const urt::runtime& rt,
                     const std::vector<int>& measuring_workers,
                     bool fell_back, std::uint64_t buckets, std::uint64_t load_runs,
                     const urt::group_stats* cid_group,
                     const urt::per_cid<std::uint64_t>* cid_counts, bool pm_qos_held) {
  const auto b = [](bool v) { return v ? "true" : "false"; };
  std::string s;
  s += "    \"version\": " + json_string(URT_CYCLICTEST_VERSION) + ",\n";
  s += "    \"topology\": " + json_string(o.topology_text) + ",\n";
  s += "    \"cpus\": " + json_string(ro.cpus) + ",\n";
  s += "    \"workers\": " + std::to_string(rt.worker_count()) + ",\n";
  s += "    \"policy\": " + json_string(name_of(policy_spellings, ro.policy)) + ",\n";
  s += "    \"policy_fallback\": " + std::string(b(fell_back)) + ",\n";
  s += "    \"fifo_priority\": " +
       std::to_string(ro.policy == urt::worker_policy::fifo ? ro.fifo_priority : 0) + ",\n";
  s += "    \"task_priority\": " + std::to_string(o.priority) + ",\n";
  s += "    \"cpupri\": " + json_string(name_of(cpupri_spellings, ro.cpupri)) + ",\n";
  s += "    \"migration\": " + json_string(name_of(migration_spellings, ro.migration)) + ",\n";
  s += "    \"ipi_timeout_us\": " +
       std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(ro.ipi_timeout).count()) +
       ",\n";
  s += "    \"overrun\": " + json_string(name_of(overrun_spellings, o.overrun)) + ",\n";
  s += "    \"lock_memory\": " + std::string(b(o.mlockall)) + ",\n";
  // The PM QoS request held during the run (null: none, --laptop or no
  // /dev/cpu_dma_latency to open).
  s += "    \"cpu_dma_latency_us\": " +
       (pm_qos_held ? std::to_string(o.latency_target_us) : std::string("null")) + ",\n";
  s += "    \"timer_spin_us\": " + std::to_string(o.timer_spin_us) + ",\n";
  s += "    \"timer_wake\": " + json_string(name_of(timer_wake_spellings, ro.timer_wake)) + ",\n";
  const urt::worker_stats total = rt.stats().total();
  s += "    \"timer_advance_ns\": " + std::to_string(total.timer_advance_ns) + ",\n";
  s += "    \"timer_spin_total_ns\": " + std::to_string(total.timer_spin_ns) + ",\n";
  s += "    \"idle_spin_ns\": " + std::to_string(ro.idle_spin.count()) + ",\n";
  s += "    \"idle_spin_policy\": " + json_string(name_of(spin_policy_spellings, ro.idle_spin_policy)) +
       ",\n";
  // The adapted spin of the workers that run measuring series (idle
  // workers keep their initial maximum and never spend it again).
  std::uint64_t spin_now = 0;
  const urt::runtime_stats st = rt.stats();
  for (const int w : measuring_workers) {
    if (w >= 0) spin_now = std::max(spin_now, st.workers[static_cast<std::size_t>(w)].idle_spin_ns);
  }
  s += "    \"idle_spin_now_ns\": " + std::to_string(spin_now) + ",\n";
  s += "    \"interval_us\": " + std::to_string(o.interval_us) + ",\n";
  s += "    \"distance_us\": " + std::to_string(o.histogram_us != 0 ? 0 : o.distance_us) + ",\n";
  s += "    \"loops\": " + std::to_string(o.loops) + ",\n";
  s += "    \"duration_s\": " + std::to_string(o.duration_s) + ",\n";
  s += "    \"affinity\": " + std::string(b(o.affinity)) + ",\n";
  s += "    \"histogram_us\": " + std::to_string(o.histogram_us) + ",\n";
  s += "    \"percentile_buckets_us\": " + std::to_string(buckets) + ",\n";
  s += "    \"load\": {\"tasks_per_worker\": " + std::to_string(o.load_tasks) +
       ", \"priority\": " + std::to_string(o.load_priority) +
       ", \"runs\": " + std::to_string(load_runs) + "},\n";
  s += "    \"bandwidth\": " + bandwidth_json(ro.bandwidth, total) + ",\n";
  s += "    \"cid\": " + cid_json(o.cid, cid_group, cid_counts);
  return s;
}

/// Sets the calling thread's CPU affinity to `cpus`; false (errno set)
/// when the kernel refuses.
bool pin_this_thread(const std::vector<unsigned>& cpus) {
  if (cpus.empty()) return true;
  const unsigned count = cpus.back() + 1;  // sorted
  cpu_set_t* set = CPU_ALLOC(count);
  if (set == nullptr) return false;
  const std::size_t size = CPU_ALLOC_SIZE(count);
  CPU_ZERO_S(size, set);
  for (const unsigned c : cpus) CPU_SET_S(c, size, set);
  const int rc = ::sched_setaffinity(0, size, set);
  CPU_FREE(set);
  return rc == 0;
}

int run(options o) {
  // cyclictest sets this while parsing, before any output.
  if (o.unbuffered) std::setvbuf(stdout, nullptr, _IONBF, 0);
  output_file histfile;
  if (o.histogram_us != 0 && !o.histfile.empty()) histfile = open_output("--histfile", o.histfile);
  output_file json_file;
  if (!o.json.empty() && o.json != "-") json_file = open_output("--json", o.json);

  // -a CPULIST's CPUs, for -v's "Using N cpus." and the main thread (as
  // cyclictest pins its main thread to them). The runtime checks the list.
  std::vector<unsigned> affinity_cpus;
  if (!o.affinity_cpus.empty()) {
    try {
      affinity_cpus = urt::parse_cpulist(o.affinity_cpus, "cpus");
    } catch (const std::invalid_argument&) {
      // The runtime names the flag below.
    }
  }
  // cyclictest's -v preamble (the first line while parsing, when -v came
  // before -a CPULIST).
  if (o.verbose_echo_affinity && !affinity_cpus.empty()) {
    std::printf("Using %zu cpus.\n", affinity_cpus.size());
  }
  if (o.verbose) {
    std::printf("Max CPUs = %ld\n", ::sysconf(_SC_NPROCESSORS_CONF));
    std::printf("Online CPUs = %ld\n", ::sysconf(_SC_NPROCESSORS_ONLN));
    if (!affinity_cpus.empty()) std::printf("Using %zu cpus.\n", affinity_cpus.size());
  }

  if (o.histogram_us != 0 && o.distance_given) {
    std::fprintf(stderr,
                 "urt-cyclictest: distance is ignored and set to 0, if histogram enabled\n");
  }
  // Workers inherit this mask: SIGINT/SIGTERM go to the main thread only.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const std::string start_time = rfc2822_now();

  // Declared before the runtime: its tasks point into these, so they must
  // outlive it also when an exception unwinds past the runtime's drain.
  load_context load;
  run_control ctl;
  std::unique_ptr<urt::per_cid<std::uint64_t>> cid_counts;  // --cid: releases per ID
  std::vector<std::unique_ptr<measured>> threads;
  std::vector<urt::periodic_task> handles;

  urt::runtime_options ro = o.runtime_options();
  bool fell_back = false;
  std::unique_ptr<urt::runtime> rt;
  for (;;) {
    try {
      rt = std::make_unique<urt::runtime>(ro);
    } catch (const std::invalid_argument& e) {
      usage_error(flag_error(o, e.what()));
    } catch (const std::system_error& e) {
      const std::string what = e.what();
      if (what.starts_with("runtime_options.policy") && o.policy_implicit() &&
          ro.policy == urt::worker_policy::fifo) {
        std::fprintf(stderr,
                     "urt-cyclictest: note: SCHED_FIFO refused for the workers (%s); running them "
                     "SCHED_OTHER instead (pass --policy=other to silence, --policy=fifo to "
                     "insist). Latencies without SCHED_FIFO are not representative.\n",
                     what.c_str());
        ro.policy = urt::worker_policy::other;
        fell_back = true;
        continue;
      }
      std::fprintf(stderr, "urt-cyclictest: %s\n", flag_error(o, what).c_str());
      return 1;
    }
    // --priospread or -p 0 without a priority, and -t without a number (or
    // -S): the default priority (threads + 1) needs the worker count, and
    // it makes the workers FIFO.
    if ((o.priospread || o.rt_priority_zero) && o.priority == 0 && o.threads < 0) {
      std::vector<std::string> notes;
      const std::string error = check_priospread(o, static_cast<unsigned>(rt->worker_count()), notes);
      if (!error.empty()) {
        rt->stop();
        usage_error(error);
      }
      for (const std::string& n : notes) std::fprintf(stderr, "urt-cyclictest: %s\n", n.c_str());
      if (o.runtime_options().policy != ro.policy && !fell_back) {
        rt->stop();
        rt.reset();
        ro = o.runtime_options();
        continue;
      }
    }
    break;
  }
  if (o.load_tasks > 0 && o.load_priority > o.priority) {
    std::fprintf(stderr,
                 "urt-cyclictest: note: --load priority %d is above -p %d: a worker always runs "
                 "its most urgent task first, so the measuring tasks starve while the load "
                 "runs\n",
                 o.load_priority, o.priority);
  }

  const std::size_t workers = rt->worker_count();
  const unsigned nthreads =
      o.threads < 0 ? static_cast<unsigned>(workers) : static_cast<unsigned>(o.threads);
  // -t without a number: the worker count was needed to check these. Both
  // come before any histogram is allocated.
  std::string error = check_intervals(o, nthreads);
  if (error.empty()) error = check_histogram_memory(o, nthreads);
  if (error.empty()) {
    std::vector<std::string> notes;
    error = check_priospread(o, nthreads, notes);
  }
  if (!error.empty()) {
    rt->stop();
    usage_error(error);
  }
  // After every check of the command line (the runtime checks -a's CPUs):
  // a bad one exits 2 before anything is said or held.
  const int latency_fd = set_latency_target(o);
  // cyclictest pins its main thread to -a's CPUs (the runtime accepted them).
  if (!affinity_cpus.empty() && !pin_this_thread(affinity_cpus)) {
    std::fprintf(stderr, "urt-cyclictest: WARN: Couldn't setaffinity in main thread: %s\n",
                 std::strerror(errno));
  }
  // With -h, latency_stats keeps a count and an overflow slot per bucket:
  // what check_histogram_memory() counted (with -N the counts are an array
  // of their own, the 1 us buckets for the percentiles stay 10 ms).
  static_assert(histogram_bucket_bytes == 2 * sizeof(std::uint64_t));
  const std::size_t buckets = o.histogram_us != 0 ? o.histogram_us : default_buckets;
  // The 1 us buckets the percentiles count in (latencies above them are
  // kept by value): at least default_buckets, whatever -h.
  const std::size_t exact_buckets =
      o.nsecs ? latency_stats::exact_buckets : std::max(buckets, latency_stats::exact_buckets);
  const std::size_t outliers = o.histogram_us != 0 ? o.histogram_us : 0;
  ctl.breaktrace = static_cast<std::int64_t>(o.breaktrace);
  ctl.spike = static_cast<std::int64_t>(o.spike);
  if (o.spike != 0) ctl.spikes.resize(o.spike_nodes);
  ctl.end_on_finish = o.refresh_on_max;
  // Thread n is a series on worker n % workers (below): its tid (T: line,
  // -b, histogram header) and CPU (JSON) are that worker's from the start,
  // as cyclictest's are its thread's, also for a thread that takes no
  // sample before the run ends (-l, -A). One task per worker reads them.
  std::vector<int> worker_tids(workers, 0);
  {
    std::latch named(static_cast<std::ptrdiff_t>(workers));
    for (unsigned w = 0; w < workers; ++w) {
      rt->spawn(urt::task_spec{.priority = urt::priority_max, .affinity = urt::worker_set{w}},
                [&worker_tids, &named, w] {
                  worker_tids[w] = static_cast<int>(::syscall(SYS_gettid));
                  named.count_down();
                });
    }
    named.wait();
  }
  threads.reserve(nthreads);
  for (unsigned i = 0; i < nthreads; ++i) {
    threads.push_back(std::make_unique<measured>(i, buckets, outliers, o.unit(), o.loops, ctl,
                                                 o.verbose));
    threads.back()->tid.store(worker_tids[i % workers], std::memory_order_relaxed);
    threads.back()->worker.store(static_cast<int>(i % workers), std::memory_order_relaxed);
  }
  handles.resize(nthreads);

  urt::group measuring_group{};
  if (o.cid) {
    measuring_group = rt->make_group({.name = "urt-cyclictest"});
    cid_counts = std::make_unique<urt::per_cid<std::uint64_t>>(*rt, measuring_group);
  }

  load.rt = rt.get();
  if (o.load_tasks > 0) {
    for (unsigned w = 0; w < workers; ++w) {
      load.specs.push_back(
          urt::task_spec{.priority = o.load_priority, .affinity = urt::worker_set{w}});
    }
    for (unsigned w = 0; w < workers; ++w) {
      for (unsigned k = 0; k < o.load_tasks; ++k) rt->spawn(load.specs[w], load_task{&load, w});
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);

  // As cyclictest: thread n's first release is one interval after its
  // start; the starts are now, or with -A now + n * USEC, or with
  // --secaligned the next full second (the one after if less than 100 ms
  // remain) + USEC. All in CLOCK_MONOTONIC ns: at most 2^40 us of interval
  // and 1023 * 2^40 us of offsets, far inside the clock's range.
  const urt::clock::time_point now = urt::clock::now();
  urt::clock::time_point base = now;
  if (o.align == align_mode::secaligned) {
    const auto since = now.time_since_epoch();
    auto whole = std::chrono::duration_cast<std::chrono::seconds>(since);
    whole += since - whole > 900ms ? 2s : 1s;
    base = urt::clock::time_point(whole) + std::chrono::microseconds{o.align_offset_us};
  }
  const auto start_of = [&](unsigned i) {
    return o.align == align_mode::aligned
               ? base + std::chrono::microseconds{o.align_offset_us} * i
               : base;
  };
  std::vector<urt::clock::time_point> first_release(nthreads);
  for (unsigned i = 0; i < nthreads; ++i) {
    const std::chrono::nanoseconds period = std::chrono::microseconds{o.interval_of(i)};
    first_release[i] = start_of(i) + period;
    // One series per worker: thread n on worker n (mod the workers), with or
    // without -a. A series never migrates, and the runtime places a spawn
    // when it is made, not at each release: series spawned back to back
    // from this thread would all land on the worker of this thread's CPU.
    const unsigned w = static_cast<unsigned>(i % workers);
    const urt::task_spec spec{.priority = o.priority_of(i),
                              .affinity = urt::worker_set{w},
                              .group = measuring_group};
    if (o.verbose) {
      if (!o.affinity_cpus.empty()) {
        std::printf("Thread %u using cpu %u.\n", i, rt->topology().workers()[w].pu);
      }
      // cyclictest prints the interval after adding -d for the next thread.
      std::printf("Thread %u Interval: %" PRIu64 "\n", i, o.interval_of(i + 1));
    }
    measured* m = threads[i].get();
    urt::per_cid<std::uint64_t>* counts = cid_counts.get();
    handles[i] = rt->every(
        period, spec,
        [m, counts] {
          const urt::clock::time_point at = urt::clock::now();
          m->release(at, urt::this_task::release_time());
          if (counts != nullptr) ++counts->local();  // after the sample: its cost shows next time
        },
        first_release[i], o.overrun);
    m->handle.store(&handles[i], std::memory_order_release);  // pairs with cancel_self()
  }
  // cyclictest pins its main thread after creating the measuring threads.
  if (!o.main_affinity.empty() && !pin_this_thread(o.main_affinity_cpus)) {
    std::fprintf(stderr,
                 "urt-cyclictest: WARN: --mainaffinity: '%s': Couldn't setaffinity in main "
                 "thread: %s\n",
                 o.main_affinity.c_str(), std::strerror(errno));
  }

  const auto report_of = [&](unsigned i) {
    const measured& m = *threads[i];
    thread_report t;
    t.index = i;
    t.tid = m.tid.load(std::memory_order_relaxed);
    t.priority = o.priority_of(i);
    t.interval_us = o.interval_of(i);
    const int w = m.worker.load(std::memory_order_relaxed);
    if (w >= 0) {
      const urt::worker_place& place = rt->topology().workers()[static_cast<std::size_t>(w)];
      t.cpu = static_cast<int>(place.pu);
      t.node = static_cast<int>(place.numa);
    }
    t.first_release_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             first_release[i].time_since_epoch())
                             .count();
    t.stats = &m.stats;
    return t;
  };
  // cyclictest writes "POLICY/other" when a thread runs SCHED_OTHER at
  // priority 0 (force_sched_other: "other/other" for -p 0, its default,
  // "fifo/other" when --priospread reaches 0) and a real-time policy
  // alone; urt adds "fifo/other" for FIFO refused.
  const bool some_at_0 = o.priospread && o.priority_of(nthreads - 1) == 0;
  const std::string policy_line =
      std::string("policy: ").append(
          fell_back || (ro.policy == urt::worker_policy::fifo && some_at_0)
              ? std::string_view("fifo/other")
          : ro.policy == urt::worker_policy::other ? std::string_view("other/other")
                                                   : name_of(policy_spellings, ro.policy));
  const auto print_status = [&] {
    std::printf("%s: loadavg: %s          \n\n", policy_line.c_str(), load_average().c_str());
    for (unsigned i = 0; i < nthreads; ++i) {
      std::printf("%s\n", format_status_line(report_of(i)).c_str());
    }
    std::fflush(stdout);
  };
  std::vector<verbose_reader> readers(o.verbose ? nthreads : 0);
  const auto print_samples = [&] {
    std::string out;
    for (unsigned i = 0; i < readers.size(); ++i) take_samples(*threads[i], readers[i], o.oscope, out);
    std::fputs(out.c_str(), stdout);
  };

  // The main loop, as cyclictest's: a frame every 10 ms (none with -q or
  // -v; -v prints the new samples instead), until shutdown (a signal, -b,
  // -D), or until a thread has done its -l loops (cyclictest's
  // "allstopped": thread 0 first, its interval being the shortest). As
  // cyclictest, the first frame comes before the first release, with its
  // placeholders (tid 0, C: 0, Min:1000000). -M: after a frame, wait for a
  // new max (polled every 10 ms) before the next.
  const auto deadline = o.duration_s != 0 ? start_of(0) + std::chrono::seconds{o.duration_s}
                                           : urt::clock::time_point::max();
  const auto stopping = [&] {
    // Pairs with the tasks' release stores of `shutdown` (finish(), -b).
    return g_signalled != 0 || ctl.shutdown.load(std::memory_order_acquire) ||
           urt::clock::now() >= deadline;
  };
  const auto one_done = [&] {
    if (o.loops == 0) return false;
    for (const auto& m : threads) {
      if (m->stats.cycles() >= o.loops) return true;
    }
    return false;
  };
  const auto sleep_a_tick = [&] {
    std::this_thread::sleep_until(std::min(urt::clock::now() + 10ms, deadline));
  };
  const bool frames = !o.quiet && !o.verbose;
  while (!stopping()) {  // cyclictest's "while (!shutdown)"
    if (frames) print_status();
    if (o.verbose) print_samples();
    const bool all_stopped = one_done();
    sleep_a_tick();
    if (stopping() || all_stopped) break;
    if (frames) {
      std::printf("\033[%uA", nthreads + 2);
      std::fflush(stdout);
    }
    if (o.refresh_on_max) {
      std::vector<std::int64_t> maxes;
      for (const auto& m : threads) maxes.push_back(m->stats.cycles() == 0 ? -1 : m->stats.max_ns());
      const auto new_max = [&] {
        for (unsigned i = 0; i < nthreads; ++i) {
          const latency_stats& st = threads[i]->stats;
          if (st.cycles() != 0 && st.max_ns() > maxes[i]) return true;
        }
        return false;
      };
      while (!stopping() && !new_max()) sleep_a_tick();
    }
  }

  // cyclictest's end: shutdown, 50 ms for the threads to take the sample
  // they were waiting for, then they are stopped.
  ctl.shutdown.store(true, std::memory_order_release);  // pairs with release()'s acquire load
  const auto grace_end = urt::clock::now() + 50ms;
  for (;;) {
    bool all_finished = true;
    // Pairs with finish()'s release store of `finished`.
    for (const auto& m : threads) all_finished = all_finished && m->finished.load(std::memory_order_acquire);
    if (all_finished || urt::clock::now() >= grace_end) break;
    std::this_thread::sleep_for(1ms);
  }
  load.running.store(false, std::memory_order_relaxed);
  for (auto& h : handles) h.cancel();
  rt->stop();  // drains: the last releases and load tasks finish, workers join
  const std::string end_time = rfc2822_now();

  std::vector<thread_report> reports;
  for (unsigned i = 0; i < nthreads; ++i) reports.push_back(report_of(i));
  if (frames && o.refresh_on_max) {
    // cyclictest -M: the cursor back below the frame; no frame after it.
    std::printf("\033[%uB", nthreads + 2);
  } else if (frames) {
    // urt's last frame is the result.
    std::printf("\033[%uA", nthreads + 2);
    print_status();
  }
  if (o.verbose) {
    // Every sample (cyclictest's main thread drops those of its last 60 ms).
    print_samples();
    std::fflush(stdout);
    for (unsigned i = 0; i < readers.size(); ++i) {
      if (readers[i].lost != 0) {
        std::fprintf(stderr,
                     "urt-cyclictest: -v/--verbose: thread %u: %llu samples were overwritten "
                     "before they were printed (more than %zu behind)\n",
                     i, static_cast<unsigned long long>(readers[i].lost), verbose_ring);
      }
    }
  }
  // The JSON document (cyclictest's, with urt's members under "urt").
  const auto make_json = [&](int return_code) {
    std::vector<int> measuring_workers;
    for (const auto& m : threads) measuring_workers.push_back(m->worker.load(std::memory_order_relaxed));
    const urt::group_stats cid_stats = o.cid ? rt->stats(measuring_group) : urt::group_stats{};
    json_header h;
    h.cmdline = o.cmdline;
    h.version = URT_CYCLICTEST_VERSION;
    h.start_time = start_time;
    h.end_time = end_time;
    h.return_code = return_code;
    h.histogram = o.histogram_us != 0;
    h.urt_members =
        urt_json(o, ro, *rt, measuring_workers, fell_back, exact_buckets,
                 load.runs.load(std::memory_order_relaxed),
                 o.cid ? &cid_stats : nullptr, cid_counts.get(), latency_fd >= 0);
    return format_json(h, reports);
  };
  // --json=-: cyclictest writes the document as soon as the run ends, before
  // the -q status lines, the histogram and the break report.
  if (o.json == "-") {
    std::fputs(make_json(0).c_str(), stdout);
    std::fflush(stdout);
  }
  // cyclictest's -q summary: the status lines, none when -h dumps a histogram.
  if (o.quiet && o.histogram_us == 0) {
    for (const auto& t : reports) std::printf("%s\n", format_status_line(t).c_str());
  }
  if (o.spike != 0) {
    const std::uint64_t seen = ctl.spike_count.load(std::memory_order_relaxed);
    const std::vector<spike_record> kept(
        ctl.spikes.begin(),
        ctl.spikes.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(seen, ctl.spikes.size())));
    std::fputs(format_spikes(kept, seen).c_str(), stdout);
  }
  std::fflush(stdout);

  int rc = 0;
  if (o.histogram_us != 0) {
    const std::string hist = format_histogram(reports, o.histogram_us, o.histofall);
    if (o.histfile.empty()) {
      std::fputs(hist.c_str(), stdout);
    } else if (!write_and_close(std::move(histfile), hist)) {
      std::fprintf(stderr, "urt-cyclictest: --histfile: cannot write '%s'\n", o.histfile.c_str());
      rc = 1;
    }
  }
  if (o.breaktrace != 0) {
    std::fputs(format_break(reports, ctl.break_tid.load(std::memory_order_relaxed),
                            ctl.break_value.load(std::memory_order_relaxed),
                            ctl.broke.load(std::memory_order_relaxed))
                   .c_str(),
               stdout);
  }
  if (o.urt_summary) {
    // urt's additions, after all of cyclictest's output.
    for (const auto& t : reports) std::printf("%s\n", format_percentile_line(t).c_str());
    // What the advance cost: cyclictest sleeps and never spins.
    const urt::worker_stats total = rt->stats().total();
    std::uint64_t releases = 0;
    for (const auto& t : reports) releases += t.stats->cycles();
    std::printf("# timer: %s, advance %.1f us, spun %.2f us per release\n",
                ro.timer_spin.count() > 0 ? "timer_spin"
                                          : std::string(name_of(timer_wake_spellings, ro.timer_wake)).c_str(),
                static_cast<double>(total.timer_advance_ns) / 1e3,
                releases == 0 ? 0.0
                              : static_cast<double>(total.timer_spin_ns) / 1e3 /
                                    static_cast<double>(releases));
    std::printf("%s\n", bandwidth_line(ro.bandwidth, total).c_str());
    if (o.cid) {
      std::printf("%s\n", cid_line(*o.cid, rt->stats(measuring_group), *cid_counts).c_str());
    }
    if (o.load_tasks > 0) {
      std::printf("# load: %u task(s) per worker at priority %d ran %llu times\n", o.load_tasks,
                  o.load_priority,
                  static_cast<unsigned long long>(load.runs.load(std::memory_order_relaxed)));
    }
    std::fflush(stdout);
  }
  if (!o.json.empty() && o.json != "-" && !write_and_close(std::move(json_file), make_json(rc))) {
    std::fprintf(stderr, "urt-cyclictest: --json: cannot write '%s'\n", o.json.c_str());
    rc = 1;
  }
  std::fflush(stdout);
  if (latency_fd >= 0) ::close(latency_fd);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  parse_result parsed = parse_options(argc, argv);
  if (!parsed.ok()) usage_error(parsed.error);
  for (const std::string& w : parsed.warnings) std::fprintf(stderr, "urt-cyclictest: %s\n", w.c_str());
  if (parsed.opts.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    return run(std::move(parsed.opts));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "urt-cyclictest: %s\n", e.what());
    return 1;
  }
}
