// urt-cyclictest's command line: a cyclictest-compatible subset plus urt's
// own runtime options. Parsing never exits: errors come back as a message
// naming the flag and the value.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stats.hpp"
#include "urt/runtime.hpp"

namespace urt_cyclictest {

/// Largest -h/--histogram value (cyclictest's HIST_MAX).
inline constexpr std::uint64_t histogram_max_us = 1000000;
/// Largest -t/--threads: a runtime has at most urt::max_workers workers (a
/// series per thread spreads over them), and each thread keeps statistics
/// of its own (80 KB by default, 16 MB with -h 1000000), so that many more
/// threads only exhaust memory.
inline constexpr int max_threads = static_cast<int>(urt::max_workers);
/// Bytes a measuring thread keeps per 1 us bucket of -h: the bucket's 8-byte
/// count and, as cyclictest remembers as many overflowing cycle numbers as
/// there are buckets, an 8-byte slot for one.
inline constexpr std::uint64_t histogram_bucket_bytes = 16;
/// Largest total of the -h histograms, threads x US x histogram_bucket_bytes,
/// all allocated before the run starts: 1 GiB. cyclictest's largest
/// histogram (-h 1000000, 16 MB a thread) fits 67 threads, and 1024 threads
/// fit -h 65536. A fixed bound rather than the machine's memory, so that a
/// command line is accepted or refused alike on every machine. (Without -h
/// or with -h below 10000 a thread keeps 10000 8-byte buckets for exact
/// percentiles and a 32 KB table of the values above them: 112 MB for
/// max_threads.)
inline constexpr std::uint64_t max_histogram_bytes = std::uint64_t{1} << 30;
/// Largest interval of any measuring thread, and of -i, -d, --timer-spin
/// and --idle-spin, in us: 2^40 us (about 12.7 days), so that the interval
/// in nanoseconds and the release times computed from it stay far inside
/// the clock's range.
inline constexpr std::uint64_t max_interval_us = std::uint64_t{1} << 40;
/// Largest --latency: the kernel's largest CPU latency QoS value
/// (PM_QOS_CPU_LATENCY_DEFAULT_VALUE, 2000 s, in us); above it the write fails.
inline constexpr std::int32_t max_latency_target_us = 2000000000;
/// Largest --bandwidth period in us: the runtime's bandwidth_options::max_period.
inline constexpr std::uint64_t max_bandwidth_period_us =
    static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   urt::bandwidth_options::max_period)
                                   .count());

/// Largest -b/--breaktrace and --spike threshold and -o/--oscope reduction:
/// cyclictest keeps each in an int.
inline constexpr std::uint64_t max_threshold = 2147483647;
/// Largest --spike-nodes: spikes kept for the report (24 bytes each, all
/// allocated before the run: 24 MiB); cyclictest's default is 1024.
inline constexpr std::uint64_t max_spike_nodes = std::uint64_t{1} << 20;
/// Largest CPU number --mainaffinity may name (the kernel's NR_CPUS is at
/// most 8192).
inline constexpr unsigned max_cpu_index = 65535;
/// -v keeps each thread's latest samples in a ring this long for the main
/// thread to print (cyclictest's VALBUF_SIZE); samples overwritten before
/// they were printed are counted and said on stderr.
inline constexpr std::size_t verbose_ring = 16384;

/// How an enum value is spelled on the command line and in the JSON: one
/// table per enum flag serves both the parser and the printers.
template <class E>
struct spelling {
  std::string_view name;
  E value;
};
inline constexpr spelling<urt::worker_policy> policy_spellings[] = {
    {"other", urt::worker_policy::other}, {"fifo", urt::worker_policy::fifo}};
inline constexpr spelling<urt::cpupri_layout> cpupri_spellings[] = {
    {"global", urt::cpupri_layout::global},
    {"per_numa", urt::cpupri_layout::per_numa},
    {"per_llc", urt::cpupri_layout::per_llc},
    {"per_llc_bytes", urt::cpupri_layout::per_llc_bytes}};
inline constexpr spelling<urt::migration_mode> migration_spellings[] = {
    {"push_ipi", urt::migration_mode::push_ipi},
    {"pull", urt::migration_mode::pull},
    {"none", urt::migration_mode::none}};
inline constexpr spelling<urt::spin_policy> spin_policy_spellings[] = {
    {"adaptive", urt::spin_policy::adaptive}, {"fixed", urt::spin_policy::fixed}};
inline constexpr spelling<urt::timer_wake_mode> timer_wake_spellings[] = {
    {"at_release", urt::timer_wake_mode::at_release},
    {"adaptive", urt::timer_wake_mode::adaptive}};
inline constexpr spelling<urt::throttle_mode> throttle_spellings[] = {
    {"off", urt::throttle_mode::off},
    {"deferred", urt::throttle_mode::deferred},
    {"strict", urt::throttle_mode::strict}};
inline constexpr spelling<urt::concurrency_id_mode> cid_spellings[] = {
    {"batched_scan", urt::concurrency_id_mode::batched_scan},
    {"ownership", urt::concurrency_id_mode::ownership}};
inline constexpr spelling<urt::overrun_policy> overrun_spellings[] = {
    {"skip", urt::overrun_policy::skip}, {"catch_up", urt::overrun_policy::catch_up}};

/// The spelling of `value` in `table`, or "?" when it has none.
template <class E, std::size_t N>
constexpr std::string_view name_of(const spelling<E> (&table)[N], E value) noexcept {
  for (const spelling<E>& s : table) {
    if (s.value == value) return s.name;
  }
  return "?";
}

/// -A/--aligned and --secaligned: where the threads' wake-ups start.
enum class align_mode {
  none,        ///< all at the run's start (urt releases every series from one start)
  aligned,     ///< -A USEC: thread n starts at the run's start + n * USEC
  secaligned,  ///< --secaligned [USEC]: all at the next full second + USEC
};

struct options {
  // --- cyclictest's flags (same letters, same meanings) ---
  int threads = 1;                   ///< -t: 1..max_threads; -1 = one per worker
  int priority = 0;                  ///< -p: task priority 0..99 (cyclictest's default 0)
  std::uint64_t interval_us = 1000;  ///< -i: base interval
  std::uint64_t distance_us = 500;   ///< -d: thread n runs at interval + n * distance
  bool distance_given = false;       ///< -d was on the command line
  std::uint64_t loops = 0;           ///< -l: releases per thread; 0 = endless
  std::uint64_t duration_s = 0;      ///< -D: seconds; 0 = no limit
  bool affinity = false;             ///< -a given (thread n runs on worker n % workers anyway)
  std::string affinity_cpus;         ///< -a CPULIST: run workers only on these PUs
  bool mlockall = false;             ///< -m
  bool quiet = false;                ///< -q: only the summary at exit
  std::uint64_t histogram_us = 0;    ///< -h: histogram buckets (us); 0 = no histogram
  std::string histfile;              ///< --histfile: histogram there instead of stdout
  std::string json;                  ///< --json: cyclictest's JSON summary to this file
  bool urt_summary = false;          ///< --urt-summary: urt's lines after cyclictest's output
  bool laptop = false;               ///< --laptop, --default-system: leave /dev/cpu_dma_latency alone
  bool default_system = false;       ///< --default-system (its own warning)
  bool smp = false;                  ///< -S/--smp: -t (one per CPU) -a, one priority
  /// --latency: the PM QoS target written into /dev/cpu_dma_latency (and
  /// held while the run lasts), in us; cyclictest's default 0.
  std::int32_t latency_target_us = 0;
  bool nsecs = false;                 ///< -N: latencies in ns (stdout, histogram, JSON)
  /// -b: end the run once a latency exceeds this, in the reported unit (ns
  /// with -N, as cyclictest compares it); 0 = never.
  std::uint64_t breaktrace = 0;
  bool histofall = false;             ///< -H: -h plus a summary column over all threads
  bool verbose = false;               ///< -v: every sample as "n:c:v"
  /// -v came before -a CPULIST: cyclictest then says "Using N cpus." while
  /// still parsing, before its "Max CPUs" line (and again after it).
  bool verbose_echo_affinity = false;
  std::uint64_t oscope = 1;           ///< -o: -v prints the max of every RED samples
  bool unbuffered = false;            ///< -u: stdout unbuffered
  bool refresh_on_max = false;        ///< -M: a live frame only after a new max
  bool priospread = false;            ///< --priospread: thread n at -p minus n
  /// -p 0 as cyclictest reads it: -p means a real-time policy, and a
  /// real-time policy at priority 0 defaults to threads + 1 (check_priospread).
  bool rt_priority_zero = false;
  align_mode align = align_mode::none;  ///< -A / --secaligned
  std::uint64_t align_offset_us = 0;  ///< their USEC
  std::string main_affinity;          ///< --mainaffinity as given (empty: not given)
  std::vector<unsigned> main_affinity_cpus;  ///< ...its CPUs
  /// --spike: record every latency above this (reported unit); 0 = off.
  std::uint64_t spike = 0;
  std::uint64_t spike_nodes = 1024;   ///< --spike-nodes: spikes kept for the report
  // --- urt's own ---
  urt::topology_source topology = urt::topology_source::system();
  std::string topology_text = "system";       ///< --topology as given
  std::uint64_t timer_spin_us = 0;            ///< --timer-spin
  urt::timer_wake_mode timer_wake = urt::runtime_options{}.timer_wake;  ///< --timer-wake
  std::optional<std::uint64_t> idle_spin_us;  ///< --idle-spin; nullopt = runtime default
  urt::spin_policy idle_spin_policy = urt::runtime_options{}.idle_spin_policy;  ///< --idle-spin-policy
  std::optional<urt::worker_policy> policy;   ///< --policy; nullopt = fifo iff -p > 0
  std::optional<int> fifo_priority;           ///< --urt-fifo-priority; nullopt = -p, else 90
  urt::cpupri_layout cpupri = urt::runtime_options{}.cpupri;  ///< --cpupri
  urt::migration_mode migration = urt::runtime_options{}.migration;  ///< --migration
  std::optional<int> ipi_timeout_us;  ///< --ipi-timeout (unset: the runtime's default)
  /// --throttle (mode) and --bandwidth (runtime/period): each worker's FIFO
  /// budget; the runtime's default where not given.
  urt::bandwidth_options bandwidth = urt::runtime_options{}.bandwidth;
  std::string bandwidth_text;  ///< --bandwidth as given (empty: not given)
  /// --cid: the measuring series run in a group of their own and take a
  /// concurrency ID (counting their releases in a urt::per_cid) at every
  /// release, with IDs returned in this mode; unset: no group, no IDs.
  std::optional<urt::concurrency_id_mode> cid;
  /// --overrun: what the series does with releases missed in a stall;
  /// cyclictest skips them (one sample per stall), so skip by default.
  urt::overrun_policy overrun = urt::overrun_policy::skip;
  unsigned load_tasks = 0;                    ///< --load=N:PRIO: N per worker...
  int load_priority = 0;                      ///< ...at this task priority
  bool help = false;                          ///< --help
  std::string cmdline;                        ///< argv joined by spaces (for the JSON)

  /// Interval of measuring thread n: cyclictest gives every thread the same
  /// interval when a histogram is kept (-h), else interval + n * distance.
  [[nodiscard]] std::uint64_t interval_of(unsigned n) const noexcept {
    return histogram_us != 0 ? interval_us : interval_us + n * distance_us;
  }
  /// Task priority of measuring thread n: -p, or with --priospread -p - n
  /// (check_priospread() keeps it at 0 or more).
  [[nodiscard]] int priority_of(unsigned n) const noexcept {
    return priospread ? priority - static_cast<int>(n) : priority;
  }
  /// The unit latencies are reported in (-N: ns).
  [[nodiscard]] latency_unit unit() const noexcept {
    return nsecs ? latency_unit::ns : latency_unit::us;
  }
  /// The worker policy to ask for: --policy, else fifo when -p > 0 (as
  /// cyclictest uses SCHED_FIFO for -p > 0), else other.
  [[nodiscard]] urt::worker_policy effective_policy() const noexcept {
    if (policy) return *policy;
    return priority > 0 ? urt::worker_policy::fifo : urt::worker_policy::other;
  }
  /// True when fifo was chosen only because of -p (and may fall back).
  [[nodiscard]] bool policy_implicit() const noexcept { return !policy.has_value(); }
  [[nodiscard]] int effective_fifo_priority() const noexcept {
    if (fifo_priority) return *fifo_priority;
    return priority > 0 ? priority : 90;
  }
  /// The runtime options these flags describe (policy as effective_policy()).
  [[nodiscard]] urt::runtime_options runtime_options() const;
};

struct parse_result {
  options opts;
  std::string error;  ///< empty on success: "FLAG: 'VALUE' why"
  /// Accepted, but said on stderr, as cyclictest warns: a -D with
  /// characters after its unit, --policy=other after -p.
  std::vector<std::string> warnings;
  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

/// Parses argv with getopt_long (resets getopt's state first, so it may be
/// called repeatedly). argv may be permuted, as getopt_long does.
parse_result parse_options(int argc, char** argv);
/// The same for a vector of arguments; args[0] is the program name.
parse_result parse_options(const std::vector<std::string>& args);

/// Empty when the interval of every one of `threads` measuring threads
/// (interval_of(n) for n < threads) is at most max_interval_us; else a
/// message naming -d/--distance and its value. Overflow-free for any count.
std::string check_intervals(const options& o, unsigned threads);

/// Empty when the -h histograms of `threads` measuring threads (threads x
/// histogram_us x histogram_bucket_bytes) fit in max_histogram_bytes; else
/// a message naming -h/--histogram and -t/--threads and their values.
/// Overflow-free for any count.
std::string check_histogram_memory(const options& o, unsigned threads);

/// The priorities once the thread count is known. --policy=fifo without
/// -p: cyclictest's "defaulting realtime priority to" threads + 1 (set in
/// `o`, said in `warnings`). --priospread with `threads` measuring threads:
/// without -p, the same default; empty when
/// every thread's priority, -p - n, is in 0..99, else a message naming
/// --priospread, -p/--priority and -t/--threads and their values.
/// Overflow-free for any count.
std::string check_priospread(options& o, unsigned threads, std::vector<std::string>& warnings);

/// The usage text (--help).
std::string usage(std::string_view program = "urt-cyclictest");

/// Longest -D/--duration: 2^32 s (about 136 years), so that the deadline
/// computed from it stays far inside the clock's range.
inline constexpr std::uint64_t max_duration_s = std::uint64_t{1} << 32;

/// Parses a cyclictest duration: a whole number of seconds with an optional
/// unit s, m, h or d (either case), at most max_duration_s; as cyclictest's
/// parse_time_string(), anything after the unit is ignored ("1m5" is 60 s).
/// nullopt for anything else.
std::optional<std::uint64_t> parse_duration(std::string_view text);

/// Rewrites a runtime construction error (std::invalid_argument or
/// std::system_error naming runtime_options.FIELD) so that it names the
/// command line flag that set the field and its value.
std::string flag_error(const options& o, std::string_view what);

}  // namespace urt_cyclictest
