// urt-cyclictest's output in the kernel cyclictest's formats: the live
// "T: 0 ( tid) P:.. I:.. C:.. Min: Act: Avg: Max:" lines, the histogram
// (-h / --histfile) and the JSON summary (--json); urt's percentiles only
// under --urt-summary and in the JSON's "urt" object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stats.hpp"

namespace urt_cyclictest {

/// One measuring thread as the reports see it.
struct thread_report {
  unsigned index = 0;             ///< thread number (T:)
  int tid = 0;                    ///< OS thread id of its worker (0 until its first release)
  int priority = 0;               ///< task priority (P:)
  std::uint64_t interval_us = 0;  ///< I:
  int cpu = -1;                   ///< OS index of the PU of its worker; -1 if it never ran
  int node = -1;                  ///< NUMA node of that worker; -1 if it never ran
  /// Its first release time, CLOCK_MONOTONIC ns (JSON urt.threads only).
  std::int64_t first_release_ns = 0;
  const latency_stats* stats = nullptr;
};

/// cyclictest's status line: "T: 0 ( 1234) P:80 I:1000 C:   2000 Min:      7 Act:   16 Avg:   17
/// Max:     107"; in the stats' unit, with -N's wider Act: and Avg: ("Act:%8ld Avg:%8ld").
std::string format_status_line(const thread_report& t);

/// One -v sample: cyclictest's "%8d:%8lu:%8ld\n" (thread, cycle, value).
std::string format_verbose_line(unsigned thread, std::uint64_t cycle, std::int64_t value);

/// One spike --spike recorded.
struct spike_record {
  unsigned thread = 0;         ///< thread number
  std::int64_t value = 0;      ///< latency in the reported unit
  std::int64_t time_us = 0;    ///< CLOCK_MONOTONIC time of the wake-up, us (cyclictest's calctime)
};
/// cyclictest's spike report: nothing when none was kept, else an empty
/// line, "T:%2d Spike:%8ld: TS: %12ld" per kept spike, "spikes = N" (all
/// of them, kept or not) and an empty line.
std::string format_spikes(const std::vector<spike_record>& kept, std::uint64_t total);

/// cyclictest's -b lines: "# Thread Ids:" with " %05d" per thread, then,
/// when a latency exceeded the threshold, "# Break thread: TID" and
/// "# Break value: V".
std::string format_break(const std::vector<thread_report>& threads, int break_tid,
                         std::int64_t break_value, bool broke);
/// urt's percentile line (--urt-summary): "T: 0 p50: 15 p99: 31 p99.9: 60".
std::string format_percentile_line(const thread_report& t);

/// cyclictest's histogram: "# Histogram", one "%06d" line per bucket with a
/// "%06lu" column per thread (tab separated), then the footer (# Total: only
/// the in-range samples, # Min/Avg/Max Latencies, # Histogram Overflows,
/// # Histogram Overflow at cycle number, one "# Thread N:" line each) and an
/// empty line. `histofall` (-H), with more than one thread: a last column
/// summing the threads' counts, and a last value on # Total: (their sum),
/// # Max Latencies: (the largest) and # Histogram Overflows: (their sum).
std::string format_histogram(const std::vector<thread_report>& threads, std::uint64_t buckets,
                             bool histofall = false);

/// Everything in the JSON besides the threads.
struct json_header {
  std::string cmdline;
  std::string version;     ///< "rt_test_version:" (urt's version)
  std::string start_time;  ///< RFC 2822, as cyclictest
  std::string end_time;
  int return_code = 0;
  bool histogram = false;   ///< -h given: the per-thread "histogram" objects are filled
  /// The "urt" object's members after "threads" (JSON text, one per line,
  /// indented 4, no trailing comma); may be empty.
  std::string urt_members;
};

/// cyclictest's JSON schema, key for key (file_version 1: "cmdline:",
/// "rt_test_version:", start_time, end_time, return_code, sysinfo,
/// num_threads, resolution_in_ns (1 with -N, else 0, as cyclictest writes
/// it), thread {"N": {histogram {"bucket": count} (empty without -h),
/// cycles, min, max, avg, cpu, node}}, latencies in the stats' unit), plus
/// one top-level "urt" object: "threads" {"N": {p50, p99, p99_9 (us),
/// overflows, min_ns, max_ns, avg_ns, tid, first_release_ns}} and
/// header.urt_members.
std::string format_json(const json_header& header, const std::vector<thread_report>& threads);

/// `s` as a JSON string literal, quotes included.
std::string json_string(std::string_view s);

/// The local time now in cyclictest's format ("Wed, 02 Dec 2026 15:26:03 +0000").
std::string rfc2822_now();

}  // namespace urt_cyclictest
