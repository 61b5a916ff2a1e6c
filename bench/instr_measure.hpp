// instr_measure: how the single-threaded benchmarks time and count an
// operation: user-mode instructions from the hardware counter
// (perf_event_open, the calling thread) when the machine has a PMU, or
// from callgrind's client requests when run under
// `valgrind --tool=callgrind` (exact, and usable in VMs without a PMU), and
// ns per operation always; medians of repetitions. Shared by
// urt-cpupri-bench and urt-cid-bench.
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define URT_BENCH_HAVE_CALLGRIND 1
#else
#define URT_BENCH_HAVE_CALLGRIND 0
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace urt_bench {

using steady = std::chrono::steady_clock;

// Keeps `v` alive: the compiler must assume the asm reads it.
template <class T>
inline void keep(const T& v) noexcept {
  asm volatile("" : : "r,m"(v) : "memory");
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

inline double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? std::nan("") : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---------------------------------------------------------------------------
// Instruction counting.

inline bool under_callgrind() {
#if URT_BENCH_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

// A hardware instruction counter for the calling thread (user mode only).
class perf_counter {
 public:
  perf_counter() {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any CPU */,
                            -1 /* no group */, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      error_ = errno;
    } else {
      fd_ = static_cast<int>(fd);
    }
  }
  ~perf_counter() {
    if (fd_ >= 0) close(fd_);
  }
  perf_counter(const perf_counter&) = delete;
  perf_counter& operator=(const perf_counter&) = delete;

  [[nodiscard]] bool ok() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int error() const noexcept { return error_; }
  // Instructions counted so far, or 0 when the read fails.
  [[nodiscard]] std::uint64_t value() const noexcept {
    std::uint64_t v = 0;
    if (fd_ < 0 || ::read(fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return 0;
    return v;
  }

 private:
  int fd_ = -1;
  int error_ = 0;
};

inline std::string why_no_counter(int err) {
  std::string s = "perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS) failed: ";
  s += std::generic_category().message(err);
  s += " (errno " + std::to_string(err) + ")";
  switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
      s += ": no hardware PMU event (usual in a VM without a virtual PMU)";
      break;
    case EACCES:
    case EPERM:
      s += ": not permitted (see /proc/sys/kernel/perf_event_paranoid)";
      break;
    case ENOSYS:
      s += ": kernel without perf events";
      break;
    default:
      break;
  }
  return s;
}

enum class count_mode { perf, callgrind, none };

inline count_mode g_mode = count_mode::none;
inline unsigned g_callgrind_part = 0;  // dumps written so far

// Callgrind: zero the counters, and later dump them to
// callgrind.out.<pid>.<part> and read the total back. NaN if the file is not
// where callgrind writes it by default (e.g. --callgrind-out-file was given).
inline void callgrind_begin() {
#if URT_BENCH_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
}
inline double callgrind_end() {
#if URT_BENCH_HAVE_CALLGRIND
  CALLGRIND_DUMP_STATS;
#endif
  ++g_callgrind_part;
  const std::string file =
      "callgrind.out." + std::to_string(getpid()) + "." + std::to_string(g_callgrind_part);
  // "summary:" is the total callgrind_annotate reports.
  std::ifstream in(file);
  std::string line;
  constexpr std::string_view key = "summary:";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + key.size(), nullptr);
  }
  return std::nan("");
}

struct sample {
  double ns = 0;                // per operation
  double instr = std::nan("");  // per operation; NaN when not counted
};

// Runs body() (which performs `ops` operations) once, timed and counted.
template <class Body>
inline sample measure(std::uint64_t ops, Body&& body, const perf_counter* counter) {
  sample s;
  if (g_mode == count_mode::callgrind) callgrind_begin();
  const std::uint64_t i0 = counter != nullptr ? counter->value() : 0;
  const auto t0 = steady::now();
  body();
  const double secs = seconds_since(t0);
  const std::uint64_t i1 = counter != nullptr ? counter->value() : 0;
  double instr = std::nan("");
  if (g_mode == count_mode::callgrind) {
    instr = callgrind_end();
  } else if (g_mode == count_mode::perf) {
    instr = static_cast<double>(i1 - i0);
  }
  s.ns = secs * 1e9 / static_cast<double>(ops);
  s.instr = instr / static_cast<double>(ops);
  return s;
}

/// The median of the ns and, when counted, of the instructions of `runs`
/// (not empty), each on its own.
inline sample median_of(const std::vector<sample>& runs) {
  std::vector<double> ns;
  std::vector<double> instr;
  for (const sample& s : runs) {
    ns.push_back(s.ns);
    instr.push_back(s.instr);
  }
  return sample{median(ns), std::isnan(instr[0]) ? std::nan("") : median(instr)};
}

// Median of `reps` runs of measure() (ns and instructions separately):
// timings on a shared VM jump now and then.
template <class Body>
inline sample measure_median(unsigned reps, std::uint64_t ops, Body&& body, const perf_counter* counter) {
  std::vector<sample> runs;
  for (unsigned r = 0; r < reps; ++r) runs.push_back(measure(ops, body, counter));
  return median_of(runs);
}


/// How an instruction count is taken on this machine now: callgrind when
/// running under it, the hardware counter when `counter` works, else none.
inline count_mode pick_count_mode(const perf_counter& counter) {
  if (under_callgrind()) return count_mode::callgrind;
  return counter.ok() ? count_mode::perf : count_mode::none;
}

}  // namespace urt_bench
