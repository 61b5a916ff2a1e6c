// libFuzzer target: urt-cyclictest's command line (bench/cyclictest/options.cpp).
// The input is split at NUL bytes into arguments (argv[0] prepended).
// Checks: a rejection is a message (never an exception or a crash); an
// accepted command line has every value inside its documented range, its
// per-thread intervals are checked without overflow (check_intervals), and
// the runtime options it describes either validate or fail with a message
// that flag_error() turns into one naming the flag.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::vector<std::string>& args) {
  urt_fuzz::fail("fuzz_cyclictest_cli", what, args);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ct = urt_cyclictest;
  const std::vector<std::string> args = urt_fuzz::split_args(data, size, {"urt-cyclictest"});
  if (args.size() > 64) return 0;  // a command line, not a corpus of them

  const ct::parse_result r = ct::parse_options(args);
  if (!r.ok()) return 0;
  const ct::options& o = r.opts;
  if (o.threads != -1 && (o.threads < 1 || o.threads > ct::max_threads)) fail("-t out of range", args);
  if (o.priority < 0 || o.priority > urt::priority_max) fail("-p out of range", args);
  if (o.interval_us < 1 || o.interval_us > ct::max_interval_us) fail("-i out of range", args);
  if (o.distance_us > ct::max_interval_us) fail("-d out of range", args);
  if (o.histogram_us > ct::histogram_max_us) fail("-h out of range", args);
  // As cyclictest: a priority means SCHED_FIFO, whatever --policy says.
  if (o.priority > 0 && o.effective_policy() != urt::worker_policy::fifo) {
    fail("-p > 0 without SCHED_FIFO", args);
  }
  if (o.duration_s > ct::max_duration_s) fail("-D out of range", args);
  if (o.latency_target_us < 0 || o.latency_target_us > ct::max_latency_target_us) {
    fail("--latency out of range", args);
  }
  if (o.load_tasks > 1000 || o.load_priority < 0 || o.load_priority > urt::priority_max) {
    fail("--load out of range", args);
  }
  // The intervals, for as many threads as -t gives (or a runtime could have).
  const unsigned threads = o.threads < 0 ? static_cast<unsigned>(ct::max_threads)
                                         : static_cast<unsigned>(o.threads);
  if (ct::check_intervals(o, threads).empty()) {
    for (unsigned n = 0; n < threads; ++n) {
      if (o.interval_of(n) > ct::max_interval_us) fail("an interval above the limit", args);
    }
  } else if (o.threads > 0) {
    fail("parse_options accepted what check_intervals rejects", args);
  }
  if (o.threads > 0 && !ct::check_histogram_memory(o, threads).empty()) {
    fail("parse_options accepted what check_histogram_memory rejects", args);
  }
  // The runtime options: valid, or a message naming a field.
  const urt::runtime_options ro = o.runtime_options();
  try {
    ro.validate();
  } catch (const std::invalid_argument& e) {
    const std::string rewritten = ct::flag_error(o, e.what());
    if (rewritten.find("runtime_options.") == std::string::npos) fail("flag_error lost the field", args);
  }
  (void)ct::usage();
  return 0;
}
