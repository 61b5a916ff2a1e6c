// libFuzzer target: urt-loadgen's command line (bench/loadgen/options.cpp).
// The input is split at NUL bytes into arguments (argv[1..]).
// Checks: a rejection is a loadgen::usage_error with a message (any other
// exception escapes and is a crash); an accepted command line has every
// value inside the range --help documents (and --rounds x --duration at
// most an hour), sorted distinct points, a client that --spin-us auto lets
// spin only on CPUs of its own, and targets that resolve_targets() either
// orders with the baseline first or rejects with a message; every interval
// the run derives from the rates (1 / --control-rate, connections / the
// smallest offered rate) converts to nanoseconds without overflow (ns_of
// saturates at a day).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"
#include "options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::vector<std::string>& args) {
  urt_fuzz::fail("fuzz_loadgen_cli", what, args);
}

bool in(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = urt_fuzz::split_args(data, size);
  if (args.size() > 64) return 0;  // a command line, not a corpus of them

  loadgen::options o;
  try {
    o = loadgen::parse_options(args);
  } catch (const loadgen::usage_error& e) {
    if (std::string_view(e.what()).empty()) fail("an empty message", args);
    return 0;
  }
  if (o.help) return 0;
  if (o.points.empty()) fail("no points", args);
  for (std::size_t i = 0; i < o.points.size(); ++i) {
    if (!(o.points[i] > 0 && o.points[i] <= 1000)) fail("--points out of range", args);
    if (i > 0 && !(o.points[i - 1] < o.points[i])) fail("--points not sorted and distinct", args);
  }
  if (!in(o.duration_s, 0.05, 3600)) fail("--duration out of range", args);
  if (o.rounds < 1 || o.rounds > 100) fail("--rounds out of range", args);
  // Every round's samples are kept: an hour of them per point at most.
  if (o.rounds * o.duration_s > 3600) fail("--rounds x --duration over an hour", args);
  if (!in(o.warmup_s, 0, 3600)) fail("--warmup out of range", args);
  if (!in(o.capacity_s, 0.05, 3600)) fail("--capacity-duration out of range", args);
  if (o.capacity && !(in(*o.capacity, 0, 1e7) && *o.capacity > 0)) fail("--capacity out of range", args);
  if (!(in(o.timeout_s, 0, 3600) && o.timeout_s > 0)) fail("--timeout out of range", args);
  if (o.spin_us && *o.spin_us > 10'000'000 && *o.spin_us != loadgen::spin_always) {
    fail("--spin-us out of range", args);
  }
  // auto: the client spins only on CPUs that no started server has.
  if (!o.spin_us && loadgen::client_spin_us(o) != 0) {
    for (const int c : o.client_cpus) {
      for (const int s : o.server_cpus) {
        if (c == s) fail("--spin-us auto spins on a server's CPU", args);
      }
    }
    if (o.client_cpus.empty() || o.server_cpus.empty()) fail("--spin-us auto spins unpinned", args);
  }
  if (o.client_priority < 0 || o.client_priority > 99) fail("--client-priority out of range", args);
  if (o.bulk == loadgen::bulk_command::work && (o.work_us < 1 || o.work_us > 1'000'000)) {
    fail("--bulk work:US out of range", args);
  }
  if (o.bulk == loadgen::bulk_command::keys && o.keys_pattern.empty()) fail("--bulk keys: no pattern", args);
  if (o.bulk_conns > 1024) fail("--bulk-conns out of range", args);  // 0: from the server's threads
  if (o.control_conns < 1 || o.control_conns > 1024) fail("--control-conns out of range", args);
  if (!(in(o.control_rate, 0, 100'000) && o.control_rate > 0)) fail("--control-rate out of range", args);
  if (o.keys < 1 || o.keys > 1'000'000) fail("--keys out of range", args);
  for (const int cpu : o.server_cpus) {
    if (cpu < 0 || cpu > 4095) fail("--server-cpus out of range", args);
  }
  for (const int cpu : o.client_cpus) {
    if (cpu < 0 || cpu > 4095) fail("--client-cpus out of range", args);
  }

  // The intervals a run derives: every one a duration, never an overflow.
  const auto day = std::chrono::nanoseconds(std::chrono::hours(24));
  const auto check_ns = [&](double s, const char* what) {
    const std::chrono::nanoseconds ns = loadgen::ns_of(s);
    if (ns.count() < 0 || ns > day) fail(what, args);
  };
  check_ns(1.0 / o.control_rate, "control interval");
  const double capacity = o.capacity.value_or(1e-300);  // a measured capacity may be tiny
  check_ns(1024 / (capacity * o.points.front() / 100.0), "bulk interval");
  check_ns(o.warmup_s + o.duration_s, "a point's length");

  try {
    const std::vector<loadgen::target> all = loadgen::resolve_targets(o);
    if (all.empty() || all.front().name != o.baseline) fail("the baseline does not run first", args);
  } catch (const loadgen::usage_error& e) {
    if (std::string_view(e.what()).empty()) fail("an empty message from resolve_targets", args);
  }
  (void)loadgen::server_threads(o);
  return 0;
}
