#include "report.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fstream>

namespace urt_cyclictest {

namespace {

template <class... Args>
std::string printf_string(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

// cyclictest's "(long)(stat->avg / stat->cycles)", in the reported unit.
long avg_whole(const latency_stats& s) { return static_cast<long>(s.avg_value()); }

}  // namespace

/// cyclictest's Min before the first cycle (its stat->min starts there).
constexpr long no_min_yet = 1000000;

namespace {
// Min as cyclictest prints it everywhere (T: line, histogram footer, JSON):
// no_min_yet for a thread without a sample, not 0.
long min_or_none(const latency_stats& s) {
  return s.cycles() == 0 ? no_min_yet : static_cast<long>(s.min_value());
}
}  // namespace

std::string format_status_line(const thread_report& t) {
  const latency_stats& s = *t.stats;
  // Read once: a first sample recorded while this line is made must not
  // mix the placeholders with figures.
  const std::uint64_t cycles = s.cycles();
  const bool none = cycles == 0;
  // cyclictest widens Act: and Avg: with -N.
  const char* fmt = s.unit() == latency_unit::ns
                        ? "T:%2u (%5d) P:%2d I:%" PRIu64 " C:%7" PRIu64
                          " Min:%7ld Act:%8ld Avg:%8ld Max:%8ld"
                        : "T:%2u (%5d) P:%2d I:%" PRIu64 " C:%7" PRIu64
                          " Min:%7ld Act:%5ld Avg:%5ld Max:%8ld";
  return printf_string(fmt, t.index, t.tid, t.priority, t.interval_us, cycles,
                       none ? no_min_yet : static_cast<long>(s.min_value()),
                       none ? 0L : static_cast<long>(s.act_value()), none ? 0L : avg_whole(s),
                       none ? 0L : static_cast<long>(s.max_value()));
}

std::string format_verbose_line(unsigned thread, std::uint64_t cycle, std::int64_t value) {
  return printf_string("%8u:%8" PRIu64 ":%8ld\n", thread, cycle, static_cast<long>(value));
}

std::string format_spikes(const std::vector<spike_record>& kept, std::uint64_t total) {
  if (kept.empty()) return {};  // cyclictest: "if (current == head) return;"
  std::string out = "\n";
  for (const spike_record& r : kept) {
    out += printf_string("T:%2u Spike:%8ld: TS: %12ld\n", r.thread, static_cast<long>(r.value),
                         static_cast<long>(r.time_us));
  }
  out += printf_string("spikes = %" PRIu64 "\n\n", total);
  return out;
}

std::string format_break(const std::vector<thread_report>& threads, int break_tid,
                         std::int64_t break_value, bool broke) {
  std::string out = "# Thread Ids:";
  for (const thread_report& t : threads) out += printf_string(" %05d", t.tid);
  out += '\n';
  if (broke) {
    out += printf_string("# Break thread: %d\n", break_tid);
    out += printf_string("# Break value: %ld\n", static_cast<long>(break_value));
  }
  return out;
}

std::string format_percentile_line(const thread_report& t) {
  const latency_stats& s = *t.stats;
  return printf_string(
      "T:%2u p50: %ld p99: %ld p99.9: %ld", t.index, static_cast<long>(s.percentile_us(0.50)),
      static_cast<long>(s.percentile_us(0.99)), static_cast<long>(s.percentile_us(0.999)));
}

std::string format_histogram(const std::vector<thread_report>& threads, std::uint64_t buckets,
                             bool histofall) {
  std::string out = "# Histogram\n";
  const std::size_t n = threads.size();
  // cyclictest: the summary column only for more than one thread.
  const bool all = histofall && n > 1;
  std::vector<std::uint64_t> totals(n, 0);
  std::uint64_t all_total = 0;
  for (std::uint64_t b = 0; b < buckets; ++b) {
    out += printf_string("%06" PRIu64 " ", b);
    std::uint64_t all_threads = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const auto h = threads[j].stats->histogram();
      const std::uint64_t c = b < h.size() ? h[b] : 0;
      out += printf_string("%06" PRIu64, c);
      if (j + 1 < n) out += '\t';
      totals[j] += c;
      all_threads += c;
    }
    if (all) {
      out += printf_string("\t%06" PRIu64, all_threads);
      all_total += all_threads;
    }
    out += '\n';
  }
  out += "# Total:";
  for (const std::uint64_t t : totals) out += printf_string(" %09" PRIu64, t);
  if (all) out += printf_string(" %09" PRIu64, all_total);
  out += "\n# Min Latencies:";
  for (const auto& t : threads) out += printf_string(" %05ld", min_or_none(*t.stats));
  out += "\n# Avg Latencies:";
  for (const auto& t : threads) out += printf_string(" %05ld", avg_whole(*t.stats));
  out += "\n# Max Latencies:";
  long max_max = 0;
  for (const auto& t : threads) {
    const long m = static_cast<long>(t.stats->max_value());
    out += printf_string(" %05ld", m);
    max_max = std::max(max_max, m);
  }
  if (all) out += printf_string(" %05ld", max_max);
  out += "\n# Histogram Overflows:";
  std::uint64_t all_overflows = 0;
  for (const auto& t : threads) {
    out += printf_string(" %05" PRIu64, t.stats->overflows());
    all_overflows += t.stats->overflows();
  }
  if (all) out += printf_string(" %05" PRIu64, all_overflows);
  out += "\n# Histogram Overflow at cycle number:\n";
  for (std::size_t j = 0; j < n; ++j) {
    const latency_stats& s = *threads[j].stats;
    out += printf_string("# Thread %zu:", j);
    for (const std::uint64_t c : s.overflow_cycles()) out += printf_string(" %05" PRIu64, c);
    if (s.overflow_cycles().size() < s.overflows()) {
      out += printf_string(" # %05" PRIu64 " others", s.overflows() - s.overflow_cycles().size());
    }
    out += '\n';
  }
  out += '\n';
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20) {
          out += printf_string("\\u%04x", static_cast<unsigned>(u));
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string rfc2822_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %T %z", &tm);
  return std::string(buf, n);
}

std::string format_json(const json_header& header, const std::vector<thread_report>& threads) {
  utsname uts{};
  if (uname(&uts) != 0) uts = utsname{};
  int realtime = 0;
  if (std::ifstream rt("/sys/kernel/realtime"); rt) {
    char c = 0;
    if (rt.get(c) && c == '1') realtime = 1;
  }
  std::string out = "{\n";
  out += "  \"file_version\": 1,\n";
  out += "  \"cmdline:\": " + json_string(header.cmdline) + ",\n";
  out += "  \"rt_test_version:\": " + json_string(header.version) + ",\n";
  out += "  \"start_time\": " + json_string(header.start_time) + ",\n";
  out += "  \"end_time\": " + json_string(header.end_time) + ",\n";
  out += "  \"return_code\": " + std::to_string(header.return_code) + ",\n";
  out += "  \"sysinfo\": {\n";
  out += "    \"sysname\": " + json_string(uts.sysname) + ",\n";
  out += "    \"nodename\": " + json_string(uts.nodename) + ",\n";
  out += "    \"release\": " + json_string(uts.release) + ",\n";
  out += "    \"version\": " + json_string(uts.version) + ",\n";
  out += "    \"machine\": " + json_string(uts.machine) + ",\n";
  out += "    \"realtime\": " + std::to_string(realtime) + "\n";
  out += "  },\n";
  out += "  \"num_threads\": " + std::to_string(threads.size()) + ",\n";
  // cyclictest writes its use_nsecs flag here: 1 with -N, else 0.
  const bool ns = !threads.empty() && threads.front().stats->unit() == latency_unit::ns;
  out += std::string("  \"resolution_in_ns\": ") + (ns ? "1" : "0") + ",\n";
  out += "  \"thread\": {\n";
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const thread_report& t = threads[i];
    const latency_stats& s = *t.stats;
    out += "    \"" + std::to_string(t.index) + "\": {\n";
    // cyclictest fills the histogram only with -h: "{      }" without, or
    // when every sample overflowed.
    out += "      \"histogram\": {";
    bool comma = false;
    const auto h = s.histogram();
    for (std::size_t b = 0; header.histogram && b < h.size(); ++b) {
      if (h[b] == 0) continue;
      out += comma ? ",\n" : "\n";
      out += printf_string("        \"%zu\": %" PRIu64, b, h[b]);
      comma = true;
    }
    if (comma) out += "\n";
    out += "      },\n";
    out += printf_string("      \"cycles\": %" PRIu64 ",\n", s.cycles());
    out += printf_string("      \"min\": %ld,\n", min_or_none(s));
    out += printf_string("      \"max\": %ld,\n", static_cast<long>(s.max_value()));
    out += printf_string("      \"avg\": %.2f,\n", s.avg_value());
    out += printf_string("      \"cpu\": %d,\n", t.cpu);
    out += printf_string("      \"node\": %d\n", t.node);
    out += i + 1 == threads.size() ? "    }\n" : "    },\n";
  }
  out += "  },\n";
  // urt's additions: one top-level object, its per-thread figures first.
  out += "  \"urt\": {\n";
  out += "    \"threads\": {";
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const thread_report& t = threads[i];
    const latency_stats& s = *t.stats;
    out += i == 0 ? "\n" : ",\n";
    out += "      \"" + std::to_string(t.index) + "\": {";
    out += printf_string("\"p50\": %ld, ", static_cast<long>(s.percentile_us(0.50)));
    out += printf_string("\"p99\": %ld, ", static_cast<long>(s.percentile_us(0.99)));
    out += printf_string("\"p99_9\": %ld, ", static_cast<long>(s.percentile_us(0.999)));
    out += printf_string("\"overflows\": %" PRIu64 ", ", s.overflows());
    out += printf_string("\"min_ns\": %ld, ", static_cast<long>(s.min_ns()));
    out += printf_string("\"max_ns\": %ld, ", static_cast<long>(s.max_ns()));
    out += printf_string("\"avg_ns\": %.1f, ", s.avg_ns());
    out += printf_string("\"tid\": %d, ", t.tid);
    out += printf_string("\"first_release_ns\": %ld}", static_cast<long>(t.first_release_ns));
  }
  if (!threads.empty()) out += "\n    ";
  out += "}";
  out += header.urt_members.empty() ? "\n" : ",\n" + header.urt_members + "\n";
  out += "  }\n";
  out += "}\n";
  return out;
}

}  // namespace urt_cyclictest
