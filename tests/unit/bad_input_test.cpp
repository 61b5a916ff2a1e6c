// One table of every input the public API rejects, and (when the
// benchmarks are built) every command line urt-cyclictest rejects: each
// row names the input, performs it, and gives the exact exception type and
// the exact message. A new option or argument adds its rows here.
//
// urt-cyclictest's parser reports an error as a string rather than an
// exception (main() prints it with the usage and exits 2); its rows throw
// that string as a `cli_exit_2` so that both halves of the table read alike.
// The rows for errors urt-cyclictest finds only when it builds its runtime
// (the topology, the cpulist, the wait windows) go the way main() goes:
// runtime construction, then flag_error() to name the flag.
// Asio (through urt/executor.hpp) before doctest and the standard headers,
// as in the library's own files (runtime/runtime.cpp says why).
#include "urt/executor.hpp"

#include <asio/defer.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <doctest/doctest.h>
#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "urt/urt.hpp"

#ifdef URT_BAD_INPUT_CYCLICTEST
#include "options.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;
using urt::clock;

// What urt-cyclictest exits 2 with: "urt-cyclictest: <what()>" and the usage.
struct cli_exit_2 : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct row {
  std::string name;            // what the input is
  std::function<void()> input;  // performs it
  std::type_index type;        // the exact type thrown
  std::string message;         // its exact what()
};

template <class E>
row reject(std::string name, std::function<void()> input, std::string message) {
  return row{std::move(name), std::move(input), std::type_index(typeid(E)), std::move(message)};
}

std::string type_name(std::type_index t) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(t.name(), nullptr, nullptr, &status),
                                          std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(t.name());
}

// A runtime of `workers` workers on a synthetic topology (no binding).
urt::runtime_options synthetic_options(unsigned workers = 4) {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("pack:1 core:" + std::to_string(workers) + " pu:1");
  o.idle_spin = 0ns;
  return o;
}

// Builds a runtime from `o` after changing it with `change`.
template <class F>
std::function<void()> build_with(F change) {
  return [change] {
    urt::runtime_options o = synthetic_options(1);
    change(o);
    urt::runtime rt(o);
  };
}

// Builds a bare topology.
std::function<void()> topology_of(urt::topology_source source, std::string cpus = "") {
  return [source, cpus] { urt::topology t(urt::topology_options{.source = source, .cpus = cpus}); };
}

// A file under the temp directory, removed when the scope ends.
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& tag)
      : path((std::filesystem::temp_directory_path() /
              ("urt_bad_input_" + std::to_string(::getpid()) + "_" + tag))
                 .string()) {}
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  void write(const std::string& text) const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  void truncate_to(std::size_t bytes) const {  // sparse: no disk space used
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    ::close(fd);
  }
};

std::string q(const std::string& s) { return "\"" + s + "\""; }

#ifdef URT_BAD_INPUT_CYCLICTEST
// urt-cyclictest's command line as main() treats it up to the run: parse,
// then build the runtime the flags describe, naming the flag on failure.
std::function<void()> cyclictest(std::vector<std::string> args) {
  return [args] {
    std::vector<std::string> argv = args;
    argv.insert(argv.begin(), "urt-cyclictest");
    const urt_cyclictest::parse_result r = urt_cyclictest::parse_options(argv);
    if (!r.ok()) throw cli_exit_2(r.error);
    try {
      urt::runtime rt(r.opts.runtime_options());
      const unsigned threads = r.opts.threads < 0 ? static_cast<unsigned>(rt.worker_count())
                                                  : static_cast<unsigned>(r.opts.threads);
      if (std::string e = urt_cyclictest::check_intervals(r.opts, threads); !e.empty()) {
        throw cli_exit_2(e);
      }
      if (std::string e = urt_cyclictest::check_histogram_memory(r.opts, threads); !e.empty()) {
        throw cli_exit_2(e);
      }
    } catch (const std::invalid_argument& e) {
      throw cli_exit_2(urt_cyclictest::flag_error(r.opts, e.what()));
    }
  };
}

row cli(std::vector<std::string> args, std::string message) {
  std::string name = "urt-cyclictest";
  for (const auto& a : args) name += " '" + a + "'";
  return reject<cli_exit_2>(name, cyclictest(std::move(args)), std::move(message));
}
#endif

}  // namespace

TEST_CASE("bad input: every rejected input of the public API and urt-cyclictest, with its message") {
  constexpr auto max_ns = ns::max();
  constexpr auto min_ns = ns::min();
  const std::string max_text = std::to_string(max_ns.count()) + "ns";
  const std::string min_text = std::to_string(min_ns.count()) + "ns";

  // Fixtures the rows share: a running runtime, a stopped one, a group of
  // each, and files for the XML topology source.
  urt::runtime rt(synthetic_options(4));
  urt::runtime other(synthetic_options(2));
  const urt::group mine = rt.make_group(urt::group_options{.name = "mine"});
  const urt::group foreign = other.make_group(urt::group_options{.name = "foreign"});
  urt::runtime stopped(synthetic_options(2));
  const urt::group stopped_group = stopped.make_group(urt::group_options{.name = "late"});
  stopped.stop();
  const urt::topology four(
      urt::topology_options{.source = urt::topology_source::synthetic("pack:1 core:4 pu:1")});

  const temp_file garbage("garbage.xml");
  garbage.write("this is not XML\n");
  const temp_file empty("empty.xml");
  empty.write("");
  const temp_file big("big.xml");
  big.truncate_to(urt::topology::max_xml_bytes + 1);
  const std::string missing = "/nonexistent/urt-topology.xml";
  const std::string temp_dir = std::filesystem::temp_directory_path().string();

  const auto noop = [] {};
  const urt::bandwidth_options bw{};  // the defaults, valid

  std::vector<row> rows = {
      // ---------------------------------------------------------- runtime_options
      reject<std::invalid_argument>(
          "runtime_options.topology kind 7",
          build_with([](auto& o) { o.topology.kind = static_cast<urt::topology_kind>(7); }),
          "runtime_options.topology: value 7 is not a topology_kind"),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, empty",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic(""); }),
          "runtime_options.topology: the synthetic description is empty"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, empty path",
          build_with([](auto& o) { o.topology = urt::topology_source::xml(""); }),
          "runtime_options.topology: the XML file path is empty"),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, unknown level",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic("pack:2 bogus:3"); }),
          "runtime_options.topology.synthetic: cannot parse \"pack:2 bogus:3\""),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, no arity",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic("pu:many"); }),
          "runtime_options.topology.synthetic: cannot parse \"pu:many\""),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, arity 0",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic("pack:2 pu:0"); }),
          "runtime_options.topology.synthetic: cannot parse \"pack:2 pu:0\""),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, 1025 PUs",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic("pu:1025"); }),
          "runtime_options.topology.synthetic: \"pu:1025\" has 1025 PUs, more than "
          "urt::max_workers (1024)"),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, 2^64 PUs and more",
          build_with([](auto& o) {
            o.topology = urt::topology_source::synthetic("4294967295 4294967295 4294967295");
          }),
          "runtime_options.topology.synthetic: \"4294967295 4294967295 4294967295\" has at "
          "least 18446744073709551615 PUs, more than urt::max_workers (1024)"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, missing file",
          build_with([&](auto& o) { o.topology = urt::topology_source::xml(missing); }),
          "runtime_options.topology.xml: cannot read " + q(missing) + ": No such file or directory"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, /dev/zero",
          build_with([](auto& o) { o.topology = urt::topology_source::xml("/dev/zero"); }),
          "runtime_options.topology.xml: \"/dev/zero\" is not a regular file"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, a directory",
          build_with([&](auto& o) { o.topology = urt::topology_source::xml(temp_dir); }),
          "runtime_options.topology.xml: " + q(temp_dir) + " is not a regular file"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, above max_xml_bytes",
          build_with([&](auto& o) { o.topology = urt::topology_source::xml(big.path); }),
          "runtime_options.topology.xml: " + q(big.path) + " has 16777217 bytes, more than "
          "16777216 (16 MiB)"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, not XML",
          build_with([&](auto& o) { o.topology = urt::topology_source::xml(garbage.path); }),
          "runtime_options.topology.xml: cannot load " + q(garbage.path) +
              ": not a valid hwloc XML topology"),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, empty file",
          build_with([&](auto& o) { o.topology = urt::topology_source::xml(empty.path); }),
          "runtime_options.topology.xml: cannot load " + q(empty.path) +
              ": not a valid hwloc XML topology"),
      // Control bytes are quoted as \xNN: a message is one line, and a NUL
      // cannot cut what() short (hwloc and open() would stop at it).
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, a NUL byte",
          build_with([](auto& o) {
            o.topology = urt::topology_source::synthetic(std::string("pack:2\0pu:9999", 14));
          }),
          "runtime_options.topology.synthetic: \"pack:2\\x00pu:9999\" has a NUL byte at offset 6"),
      reject<std::invalid_argument>(
          "runtime_options.topology synthetic, a newline",
          build_with([](auto& o) { o.topology = urt::topology_source::synthetic("pack:2\nbogus"); }),
          "runtime_options.topology.synthetic: cannot parse \"pack:2\\x0abogus\""),
      reject<std::invalid_argument>(
          "runtime_options.topology xml, a NUL byte",
          build_with([](auto& o) {
            o.topology = urt::topology_source::xml(std::string("/etc/passwd\0.xml", 16));
          }),
          "runtime_options.topology.xml: \"/etc/passwd\\x00.xml\" has a NUL byte at offset 11"),
      reject<std::invalid_argument>(
          "runtime_options.cpus, a NUL byte",
          build_with([](auto& o) { o.cpus = std::string("0\0", 2); }),
          "runtime_options.cpus: \"0\\x00\" is not a cpulist (unexpected '\\x00'); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, a trailing newline",
          build_with([](auto& o) { o.cpus = "0-1\n"; }),
          "runtime_options.cpus: \"0-1\\x0a\" is not a cpulist (unexpected '\\x0a'); expected "
          "e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, a letter",
          build_with([](auto& o) { o.cpus = "0-3,x"; }),
          "runtime_options.cpus: \"0-3,x\" is not a cpulist (unexpected 'x'); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, reversed range",
          build_with([](auto& o) { o.cpus = "3-1"; }),
          "runtime_options.cpus: \"3-1\" is not a cpulist (range 3-1 is reversed); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, open range",
          build_with([](auto& o) { o.cpus = "0-"; }),
          "runtime_options.cpus: \"0-\" is not a cpulist (missing index at the end); expected "
          "e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, leading comma",
          build_with([](auto& o) { o.cpus = ",0"; }),
          "runtime_options.cpus: \",0\" is not a cpulist (unexpected ','); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, double comma",
          build_with([](auto& o) { o.cpus = "0,,1"; }),
          "runtime_options.cpus: \"0,,1\" is not a cpulist (unexpected ','); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, trailing comma",
          build_with([](auto& o) { o.cpus = "0,"; }),
          "runtime_options.cpus: \"0,\" is not a cpulist (missing index at the end); expected "
          "e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, negative",
          build_with([](auto& o) { o.cpus = "-1"; }),
          "runtime_options.cpus: \"-1\" is not a cpulist (unexpected '-'); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, a space",
          build_with([](auto& o) { o.cpus = "0, 1"; }),
          "runtime_options.cpus: \"0, 1\" is not a cpulist (unexpected ' '); expected e.g. "
          "\"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, beyond unsigned",
          build_with([](auto& o) { o.cpus = "99999999999"; }),
          "runtime_options.cpus: \"99999999999\" is not a cpulist (index too large); expected "
          "e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, above the cpulist limit",
          build_with([](auto& o) { o.cpus = "2000000"; }),
          "runtime_options.cpus: \"2000000\" is not a cpulist (index 2000000 exceeds 1048576); "
          "expected e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "runtime_options.cpus, a PU the topology lacks",
          build_with([](auto& o) {
            o.topology = urt::topology_source::synthetic("pack:1 core:4 pu:1");
            o.cpus = "0-3,9";
          }),
          "runtime_options.cpus: PU 9 is not in the allowed set \"0-3\""),
      reject<std::invalid_argument>(
          "runtime_options.idle_spin -5ns",
          build_with([](auto& o) { o.idle_spin = -5ns; }),
          "runtime_options.idle_spin: -5ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.idle_spin min()",
          build_with([](auto& o) { o.idle_spin = ns::min(); }),
          "runtime_options.idle_spin: " + min_text + " is negative"),
      reject<std::invalid_argument>(
          "runtime_options.idle_spin max()",
          build_with([](auto& o) { o.idle_spin = ns::max(); }),
          "runtime_options.idle_spin: " + max_text + " is above 1000000000ns (1 s)"),
      reject<std::invalid_argument>(
          "runtime_options.idle_spin 1s + 1ns",
          build_with([](auto& o) { o.idle_spin = 1s + 1ns; }),
          "runtime_options.idle_spin: 1000000001ns is above 1000000000ns (1 s)"),
      reject<std::invalid_argument>(
          "runtime_options.timer_spin -1ns",
          build_with([](auto& o) { o.timer_spin = -1ns; }),
          "runtime_options.timer_spin: -1ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.timer_spin min()",
          build_with([](auto& o) { o.timer_spin = ns::min(); }),
          "runtime_options.timer_spin: " + min_text + " is negative"),
      reject<std::invalid_argument>(
          "runtime_options.timer_spin max()",
          build_with([](auto& o) { o.timer_spin = ns::max(); }),
          "runtime_options.timer_spin: " + max_text + " is above 1000000000ns (1 s)"),
      reject<std::invalid_argument>(
          "runtime_options.binding 9",
          build_with([](auto& o) { o.binding = static_cast<urt::worker_binding>(9); }),
          "runtime_options.binding: value 9 is not a worker_binding"),
      reject<std::invalid_argument>(
          "runtime_options.idle_spin_policy 9",
          build_with([](auto& o) { o.idle_spin_policy = static_cast<urt::spin_policy>(9); }),
          "runtime_options.idle_spin_policy: value 9 is not a spin_policy"),
      reject<std::invalid_argument>(
          "runtime_options.timer_wake 9",
          build_with([](auto& o) { o.timer_wake = static_cast<urt::timer_wake_mode>(9); }),
          "runtime_options.timer_wake: value 9 is not a timer_wake_mode"),
      reject<std::invalid_argument>(
          "runtime_options.policy 9",
          build_with([](auto& o) { o.policy = static_cast<urt::worker_policy>(9); }),
          "runtime_options.policy: value 9 is not a worker_policy"),
      // Linux's SCHED_FIFO range is 1..99 (sched_get_priority_min/max).
      reject<std::invalid_argument>(
          "runtime_options.fifo_priority 0 under fifo",
          build_with([](auto& o) {
            o.policy = urt::worker_policy::fifo;
            o.fifo_priority = 0;
          }),
          "runtime_options.fifo_priority: 0 is outside 1..99"),
      reject<std::invalid_argument>(
          "runtime_options.fifo_priority 100 under fifo",
          build_with([](auto& o) {
            o.policy = urt::worker_policy::fifo;
            o.fifo_priority = 100;
          }),
          "runtime_options.fifo_priority: 100 is outside 1..99"),
      reject<std::invalid_argument>(
          "runtime_options.os_slice 50 us",
          build_with([](auto& o) { o.os_slice = std::chrono::microseconds{50}; }),
          "runtime_options.os_slice: 50000ns is neither 0 nor within 100000ns..100000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.os_slice -1 ns",
          build_with([](auto& o) { o.os_slice = std::chrono::nanoseconds{-1}; }),
          "runtime_options.os_slice: -1ns is neither 0 nor within 100000ns..100000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.os_slice 101 ms",
          build_with([](auto& o) { o.os_slice = std::chrono::milliseconds{101}; }),
          "runtime_options.os_slice: 101000000ns is neither 0 nor within 100000ns..100000000ns"),
      reject<std::invalid_argument>(
          "runtime_options::realtime(INT_MIN)",
          [] { urt::runtime r(urt::runtime_options::realtime(INT_MIN)); },
          "runtime_options.fifo_priority: -2147483648 is outside 1..99"),
      reject<std::invalid_argument>(
          "runtime_options.cpupri 6",
          build_with([](auto& o) { o.cpupri = static_cast<urt::cpupri_layout>(6); }),
          "runtime_options.cpupri: value 6 is not a cpupri_layout"),
      reject<std::invalid_argument>(
          "runtime_options.migration 7",
          build_with([](auto& o) { o.migration = static_cast<urt::migration_mode>(7); }),
          "runtime_options.migration: value 7 is not a migration_mode"),
      reject<std::invalid_argument>(
          "runtime_options.ipi_timeout 0",
          build_with([](auto& o) { o.ipi_timeout = 0ns; }),
          "runtime_options.ipi_timeout: 0ns is not positive"),
      reject<std::invalid_argument>(
          "runtime_options.ipi_timeout -1ns",
          build_with([](auto& o) { o.ipi_timeout = -1ns; }),
          "runtime_options.ipi_timeout: -1ns is not positive"),
      reject<std::invalid_argument>(
          "runtime_options.ipi_timeout min()",
          build_with([](auto& o) { o.ipi_timeout = ns::min(); }),
          "runtime_options.ipi_timeout: " + min_text + " is not positive"),
      reject<std::invalid_argument>(
          "runtime_options.ipi_timeout max()",
          build_with([](auto& o) { o.ipi_timeout = ns::max(); }),
          "runtime_options.ipi_timeout: " + max_text + " is above 1000000000ns (1 s)"),
      reject<std::invalid_argument>(
          "runtime_options.io_poll_interval -1ns",
          build_with([](auto& o) { o.io_poll_interval = -1ns; }),
          "runtime_options.io_poll_interval: -1ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.io_poll_interval min()",
          build_with([](auto& o) { o.io_poll_interval = ns::min(); }),
          "runtime_options.io_poll_interval: " + min_text + " is negative"),
      reject<std::invalid_argument>(
          "runtime_options.io_poll_interval max()",
          build_with([](auto& o) { o.io_poll_interval = ns::max(); }),
          "runtime_options.io_poll_interval: " + max_text + " is above 1000000000ns (1 s)"),
      reject<std::invalid_argument>(
          "runtime_options.lock_memory 5",
          build_with([](auto& o) { o.lock_memory = static_cast<urt::memory_lock>(5); }),
          "runtime_options.lock_memory: value 5 is not a memory_lock"),
      // ------------------------------------------------ runtime_options.bandwidth
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.mode 3",
          build_with([](auto& o) { o.bandwidth.mode = static_cast<urt::throttle_mode>(3); }),
          "runtime_options.bandwidth.mode: value 3 is not a throttle_mode"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.period 0",
          build_with([](auto& o) { o.bandwidth.period = 0ns; }),
          "runtime_options.bandwidth.period: 0ns is not positive"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.period min()",
          build_with([](auto& o) { o.bandwidth.period = ns::min(); }),
          "runtime_options.bandwidth.period: " + min_text + " is not positive"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.period max_period + 1ns",
          build_with([](auto& o) { o.bandwidth.period = urt::bandwidth_options::max_period + 1ns; }),
          "runtime_options.bandwidth.period: 3600000000001ns exceeds the maximum of "
          "3600000000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.period max()",
          build_with([](auto& o) { o.bandwidth.period = ns::max(); }),
          "runtime_options.bandwidth.period: " + max_text + " exceeds the maximum of "
          "3600000000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.runtime -1ns",
          build_with([](auto& o) { o.bandwidth.runtime = -1ns; }),
          "runtime_options.bandwidth.runtime: -1ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.runtime min()",
          build_with([](auto& o) { o.bandwidth.runtime = ns::min(); }),
          "runtime_options.bandwidth.runtime: " + min_text + " is negative"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.runtime above the period",
          build_with([](auto& o) { o.bandwidth.runtime = 20ms; }),
          "runtime_options.bandwidth.runtime: 20000000ns exceeds the period of 10000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.runtime max()",
          build_with([](auto& o) { o.bandwidth.runtime = ns::max(); }),
          "runtime_options.bandwidth.runtime: " + max_text + " exceeds the period of 10000000ns"),
      reject<std::invalid_argument>(
          "runtime_options.bandwidth.runtime 0 under strict",
          build_with([](auto& o) {
            o.bandwidth.mode = urt::throttle_mode::strict;
            o.bandwidth.runtime = 0ns;
          }),
          "runtime_options.bandwidth.runtime: 0ns under a strict budget would never run a FIFO "
          "task"),
      // ------------------------------------------------ concurrency IDs' options
      reject<std::invalid_argument>(
          "runtime_options.cid_mode 7",
          build_with([](auto& o) { o.cid_mode = static_cast<urt::concurrency_id_mode>(7); }),
          "runtime_options.cid_mode: value 7 is not a concurrency_id_mode"),
      reject<std::invalid_argument>(
          "runtime_options.cid_scan_batch 0",
          build_with([](auto& o) { o.cid_scan_batch = 0; }),
          "runtime_options.cid_scan_batch: 0 is outside 1..1024"),
      reject<std::invalid_argument>(
          "runtime_options.cid_scan_batch 1025",
          build_with([](auto& o) { o.cid_scan_batch = 1025; }),
          "runtime_options.cid_scan_batch: 1025 is outside 1..1024"),
      reject<std::invalid_argument>(
          "runtime_options.cid_idle_threshold -1ns",
          build_with([](auto& o) { o.cid_idle_threshold = -1ns; }),
          "runtime_options.cid_idle_threshold: -1ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.cid_idle_threshold min()",
          build_with([](auto& o) { o.cid_idle_threshold = ns::min(); }),
          "runtime_options.cid_idle_threshold: " + min_text + " is negative"),
      reject<std::invalid_argument>(
          "runtime_options.cid_idle_threshold max()",
          build_with([](auto& o) { o.cid_idle_threshold = ns::max(); }),
          "runtime_options.cid_idle_threshold: " + max_text +
              " is above 3600000000000ns (1 h)"),
      reject<std::invalid_argument>(
          "runtime_options.cid_scan_interval -1ns",
          build_with([](auto& o) { o.cid_scan_interval = -1ns; }),
          "runtime_options.cid_scan_interval: -1ns is negative"),
      reject<std::invalid_argument>(
          "runtime_options.cid_scan_interval 1h + 1ns",
          build_with([](auto& o) { o.cid_scan_interval = std::chrono::hours{1} + 1ns; }),
          "runtime_options.cid_scan_interval: 3600000000001ns is above 3600000000000ns (1 h)"),
      // ---------------------------------------------------------- topology itself
      reject<std::invalid_argument>(
          "topology: topology_source kind 7",
          topology_of(urt::topology_source{static_cast<urt::topology_kind>(7), ""}),
          "topology: value 7 is not a topology_kind"),
      reject<std::invalid_argument>(
          "topology: synthetic, empty",
          topology_of(urt::topology_source::synthetic("")),
          "topology.synthetic: cannot parse \"\""),
      reject<std::invalid_argument>(
          "topology: synthetic, 16384 PUs",
          topology_of(urt::topology_source::synthetic("pu:16384")),
          "topology.synthetic: \"pu:16384\" has 16384 PUs, more than urt::max_workers (1024)"),
      reject<std::invalid_argument>(
          "topology: xml, empty path",
          topology_of(urt::topology_source::xml("")),
          "topology.xml: cannot read \"\": No such file or directory"),
      reject<std::invalid_argument>(
          "topology: cpus outside the topology",
          topology_of(urt::topology_source::synthetic("pack:1 core:4 pu:1"), "4"),
          "cpus: PU 4 is not in the allowed set \"0-3\""),
      reject<std::out_of_range>(
          "topology::bind_current_thread of a worker it lacks",
          [&] { (void)four.bind_current_thread(4); },
          "topology: no worker 4 (have 4)"),
      reject<std::invalid_argument>(
          "topology::bind_current_thread with a binding that is not one",
          [&] { (void)four.bind_current_thread(0, static_cast<urt::worker_binding>(7)); },
          "topology::bind_current_thread: binding: value 7 is not a worker_binding"),
      reject<std::runtime_error>(
          "topology::save_xml into a missing directory",
          [&] { four.save_xml("/nonexistent/dir/urt.xml"); },
          "topology: cannot write XML to \"/nonexistent/dir/urt.xml\": No such file or directory"),
      // ---------------------------------------------------------- cpulists, worker sets
      reject<std::invalid_argument>(
          "parse_cpulist, empty",
          [] { (void)urt::parse_cpulist("", "field"); },
          "field: \"\" is not a cpulist (empty); expected e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "parse_cpulist, above its limit",
          [] { (void)urt::parse_cpulist("0-5", "field", 4); },
          "field: \"0-5\" is not a cpulist (index 5 exceeds 4); expected e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "parse_cpulist, above UINT_MAX",
          [] { (void)urt::parse_cpulist("4294967296", "field", UINT_MAX); },
          "field: \"4294967296\" is not a cpulist (index too large); expected e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "parse_cpulist, a range of ranges",
          [] { (void)urt::parse_cpulist("1-2-3", "field"); },
          "field: \"1-2-3\" is not a cpulist (unexpected '-'); expected e.g. \"0-3,8\""),
      reject<std::invalid_argument>(
          "worker_set::parse, id 1024",
          [] { (void)urt::worker_set::parse("1024"); },
          "worker_set: \"1024\" is not a cpulist (index 1024 exceeds 1023); expected e.g. "
          "\"0-3,8\""),
      reject<std::out_of_range>(
          "worker_set{1024}",
          [] { (void)urt::worker_set{1024}; },
          "worker_set: worker id 1024 exceeds 1023"),
      reject<std::out_of_range>(
          "worker_set::add(UINT_MAX)",
          [] {
            urt::worker_set s;
            s.add(UINT_MAX);
          },
          "worker_set: worker id 4294967295 exceeds 1023"),
      reject<std::out_of_range>(
          "worker_set::first_n(1025)",
          [] { (void)urt::worker_set::first_n(1025); },
          "worker_set: 1025 workers exceed max_workers 1024"),
      // ---------------------------------------------------------- task_spec
      reject<std::invalid_argument>(
          "task_spec.priority 100",
          [&] { rt.spawn(urt::task_spec{.priority = 100}, noop); },
          "task_spec.priority: 100 is outside 0..99"),
      reject<std::invalid_argument>(
          "task_spec.priority -1",
          [&] { rt.spawn(urt::task_spec{.priority = -1}, noop); },
          "task_spec.priority: -1 is outside 0..99"),
      reject<std::invalid_argument>(
          "task_spec.priority INT_MIN",
          [&] { rt.spawn(urt::task_spec{.priority = INT_MIN}, noop); },
          "task_spec.priority: -2147483648 is outside 0..99"),
      reject<std::invalid_argument>(
          "task_spec.affinity, empty",
          [&] { rt.spawn(urt::task_spec{.affinity = urt::worker_set{}}, noop); },
          "task_spec.affinity: the set is empty"),
      reject<std::invalid_argument>(
          "task_spec.affinity, a worker past the last",
          [&] { rt.spawn(urt::task_spec{.affinity = urt::worker_set{1, 4}}, noop); },
          "task_spec.affinity: worker 4 does not exist (the runtime has workers 0-3)"),
      reject<std::invalid_argument>(
          "task_spec.affinity, worker 1023",
          [&] { rt.spawn(urt::task_spec{.affinity = urt::worker_set{1023}}, noop); },
          "task_spec.affinity: worker 1023 does not exist (the runtime has workers 0-3)"),
      reject<std::invalid_argument>(
          "task_spec.group of another runtime",
          [&] { rt.spawn(urt::task_spec{.group = foreign}, noop); },
          "task_spec.group: group 1 belongs to another runtime"),
      reject<std::invalid_argument>(
          "spawn_at: task_spec.priority 100",
          [&] { rt.spawn_at(clock::now(), urt::task_spec{.priority = 100}, noop); },
          "task_spec.priority: 100 is outside 0..99"),
      reject<std::invalid_argument>(
          "every: task_spec.affinity, empty",
          [&] { (void)rt.every(1ms, urt::task_spec{.affinity = urt::worker_set{}}, noop); },
          "task_spec.affinity: the set is empty"),
      // ---------------------------------------------------------- spawn_at, every
      reject<std::invalid_argument>(
          "spawn_at(time_point::max())",
          [&] { rt.spawn_at(clock::time_point::max(), urt::task_spec{}, noop); },
          "runtime::spawn_at: deadline time_point::max() never comes (stop(drain) would wait "
          "for it forever)"),
      reject<std::invalid_argument>(
          "every: start time_point::max()",
          [&] { (void)rt.every(1ms, urt::task_spec{}, noop, clock::time_point::max()); },
          "runtime::every: start time_point::max() never comes"),
      reject<std::invalid_argument>(
          "every: period 0",
          [&] { (void)rt.every(0ns, urt::task_spec{}, noop); },
          "runtime::every: period 0ns is not positive"),
      reject<std::invalid_argument>(
          "every: period -1ns",
          [&] { (void)rt.every(-1ns, urt::task_spec{}, noop); },
          "runtime::every: period -1ns is not positive"),
      reject<std::invalid_argument>(
          "every: period min()",
          [&] { (void)rt.every(ns::min(), urt::task_spec{}, noop); },
          "runtime::every: period " + min_text + " is not positive"),
      reject<std::invalid_argument>(
          "every: overrun 7",
          [&] {
            (void)rt.every(1ms, urt::task_spec{}, noop, clock::now(),
                           static_cast<urt::overrun_policy>(7));
          },
          "runtime::every: overrun 7 is not an overrun_policy"),
      // ---------------------------------------------------------- stop, this_task
      reject<std::invalid_argument>(
          "stop(mode 9)",
          [&] { rt.stop(static_cast<urt::stop_mode>(9)); },
          "runtime::stop: mode 9 is not a stop_mode"),
      reject<std::logic_error>(
          "stop() from inside one of its tasks",
          [&] {
            // What stop() threw crosses to this thread as a copy of its
            // message: an exception_ptr would share the exception object,
            // whose reference count libstdc++ keeps where ThreadSanitizer
            // cannot see it (a reported race between the task's release and
            // this thread's what()).
            std::promise<std::optional<std::string>> seen;  // nullopt: nothing thrown
            rt.spawn(urt::task_spec{}, [&] {
              try {
                rt.stop();
                seen.set_value(std::nullopt);
              } catch (const std::logic_error& e) {
                seen.set_value(std::string(e.what()));
              } catch (...) {
                seen.set_value(std::string("\x01"));  // another type: reported below
              }
            });
            if (const std::optional<std::string> m = seen.get_future().get()) {
              if (*m == "\x01") throw std::runtime_error("stop() threw a type other than std::logic_error");
              throw std::logic_error(*m);
            }
          },
          "runtime::stop: called from inside one of its own tasks, which it would wait for"),
      reject<std::logic_error>(
          "this_task::worker_id() outside a task",
          [] { (void)urt::this_task::worker_id(); },
          "urt::this_task: the calling thread is not running an urt task"),
      reject<std::logic_error>(
          "this_task::priority() outside a task",
          [] { (void)urt::this_task::priority(); },
          "urt::this_task: the calling thread is not running an urt task"),
      reject<std::logic_error>(
          "this_task::release_time() outside a task",
          [] { (void)urt::this_task::release_time(); },
          "urt::this_task: the calling thread is not running an urt task"),
      reject<std::logic_error>(
          "this_task::cid() outside a task",
          [] { (void)urt::this_task::cid(); },
          "urt::this_task: the calling thread is not running an urt task"),
      reject<std::invalid_argument>(
          "per_cid of a group of another runtime",
          [&] { urt::per_cid<int> p(rt, foreign); },
          "urt::per_cid: group 1 belongs to another runtime"),
      reject<std::logic_error>(
          "per_cid::local() outside a task",
          [&] {
            urt::per_cid<int> p(rt);
            p.local();
          },
          "urt::per_cid::local: the calling thread is not running a task of this runtime"),
      // ---------------------------------------------------------- stopped runtime
      reject<urt::runtime_stopped>(
          "spawn on a stopped runtime",
          [&] { stopped.spawn(urt::task_spec{}, noop); },
          "runtime::spawn: the runtime is stopped"),
      reject<urt::runtime_stopped>(
          "spawn_at on a stopped runtime",
          [&] { stopped.spawn_at(clock::now(), urt::task_spec{}, noop); },
          "runtime::spawn_at: the runtime is stopped"),
      reject<urt::runtime_stopped>(
          "every on a stopped runtime",
          [&] { (void)stopped.every(1ms, urt::task_spec{}, noop); },
          "runtime::every: the runtime is stopped"),
      reject<urt::runtime_stopped>(
          "make_group on a stopped runtime",
          [&] { (void)stopped.make_group(urt::group_options{.name = "x"}); },
          "runtime::make_group: the runtime is stopped or stopping"),
      reject<urt::runtime_stopped>(
          "set_bandwidth(bandwidth_options) on a stopped runtime",
          [&] { stopped.set_bandwidth(bw); },
          "runtime::set_bandwidth: the runtime is stopped or stopping"),
      reject<urt::runtime_stopped>(
          "set_bandwidth(group) on a stopped runtime",
          [&] { stopped.set_bandwidth(stopped_group, urt::group_budget{1ms, 10ms}); },
          "runtime::set_bandwidth: the runtime is stopped or stopping"),
      // ---------------------------------------------------------- set_bandwidth(bandwidth_options)
      reject<std::invalid_argument>(
          "set_bandwidth: mode 3",
          [&] {
            urt::bandwidth_options b;
            b.mode = static_cast<urt::throttle_mode>(3);
            rt.set_bandwidth(b);
          },
          "runtime::set_bandwidth: bandwidth.mode: value 3 is not a throttle_mode"),
      reject<std::invalid_argument>(
          "set_bandwidth: period -1ns",
          [&] { rt.set_bandwidth(urt::bandwidth_options{.runtime = 0ns, .period = -1ns}); },
          "runtime::set_bandwidth: bandwidth.period: -1ns is not positive"),
      reject<std::invalid_argument>(
          "set_bandwidth: runtime above period",
          [&] { rt.set_bandwidth(urt::bandwidth_options{.runtime = 2ms, .period = 1ms}); },
          "runtime::set_bandwidth: bandwidth.runtime: 2000000ns exceeds the period of 1000000ns"),
      reject<std::invalid_argument>(
          "set_bandwidth: strict runtime 0",
          [&] {
            rt.set_bandwidth(urt::bandwidth_options{
                .mode = urt::throttle_mode::strict, .runtime = 0ns, .period = 1ms});
          },
          "runtime::set_bandwidth: bandwidth.runtime: 0ns under a strict budget would never run "
          "a FIFO task"),
      // ---------------------------------------------------------- groups
      reject<std::invalid_argument>(
          "make_group: a name of 65 characters",
          [&] { (void)rt.make_group(urt::group_options{.name = std::string(65, 'g')}); },
          "runtime::make_group: group_options.name: 65 bytes exceed 64"),
      reject<std::invalid_argument>(
          "make_group: budget runtime 0",
          [&] {
            (void)rt.make_group(
                urt::group_options{.name = "g", .budget = urt::group_budget{0ns, 10ms}});
          },
          "runtime::make_group: group_options.budget.runtime: 0ns is not in (0, period]: a group "
          "with no FIFO time would never run a task"),
      reject<std::invalid_argument>(
          "make_group: budget period 0 (the default group_budget)",
          [&] {
            (void)rt.make_group(urt::group_options{.name = "g", .budget = urt::group_budget{}});
          },
          "runtime::make_group: group_options.budget.period: 0ns is not positive"),
      reject<std::invalid_argument>(
          "make_group: budget runtime above period",
          [&] {
            (void)rt.make_group(
                urt::group_options{.name = "g", .budget = urt::group_budget{11ms, 10ms}});
          },
          "runtime::make_group: group_options.budget.runtime: 11000000ns exceeds the period of "
          "10000000ns"),
      reject<std::invalid_argument>(
          "make_group: budget period above max_period",
          [&] {
            (void)rt.make_group(
                urt::group_options{.name = "g", .budget = urt::group_budget{1ms, ns::max()}});
          },
          "runtime::make_group: group_options.budget.period: " + max_text +
              " exceeds the maximum of 3600000000000ns"),
      reject<std::invalid_argument>(
          "make_group: budget runtime negative",
          [&] {
            (void)rt.make_group(
                urt::group_options{.name = "g", .budget = urt::group_budget{ns::min(), 10ms}});
          },
          "runtime::make_group: group_options.budget.runtime: " + min_text + " is negative"),
      reject<std::length_error>(
          "make_group beyond max_groups",
          [] {
            urt::runtime full(synthetic_options(1));
            for (unsigned i = 1; i < urt::max_groups; ++i) (void)full.make_group({});
            (void)full.make_group({});
          },
          "runtime::make_group: the runtime has 256 groups already (urt::max_groups)"),
      reject<std::invalid_argument>(
          "set_bandwidth on a group of another runtime",
          [&] { rt.set_bandwidth(foreign, urt::group_budget{1ms, 10ms}); },
          "runtime::set_bandwidth: group 1 belongs to another runtime"),
      reject<std::invalid_argument>(
          "set_bandwidth removing the budget of a group of another runtime",
          [&] { rt.set_bandwidth(foreign, std::nullopt); },
          "runtime::set_bandwidth: group 1 belongs to another runtime"),
      reject<std::invalid_argument>(
          "set_bandwidth on a group of a stopped runtime",
          [&] { rt.set_bandwidth(stopped_group, std::nullopt); },
          "runtime::set_bandwidth: group 1 belongs to another runtime"),
      reject<std::invalid_argument>(
          "set_bandwidth(group): budget period 0",
          [&] { rt.set_bandwidth(mine, urt::group_budget{}); },
          "runtime::set_bandwidth: budget.period: 0ns is not positive"),
      reject<std::invalid_argument>(
          "set_bandwidth(group): budget runtime above period",
          [&] { rt.set_bandwidth(mine, urt::group_budget{2ms, 1ms}); },
          "runtime::set_bandwidth: budget.runtime: 2000000ns exceeds the period of 1000000ns"),
      reject<std::invalid_argument>(
          "stats of a group of another runtime",
          [&] { (void)rt.stats(foreign); },
          "runtime::stats: group 1 belongs to another runtime"),
      // ---------------------------------------------------------- executor
      reject<std::invalid_argument>(
          "urt::priority(100)",
          [] { (void)urt::priority(100); },
          "urt::priority: 100 is outside 0..99"),
      reject<std::invalid_argument>(
          "urt::priority(-1)",
          [] { (void)urt::priority(-1); },
          "urt::priority: -1 is outside 0..99"),
      reject<std::invalid_argument>(
          "urt::priority(INT_MIN)",
          [] { (void)urt::priority(INT_MIN); },
          "urt::priority: -2147483648 is outside 0..99"),
      reject<std::invalid_argument>(
          "asio::require(executor, urt::priority), the query tag",
          [&] { (void)asio::require(rt.executor(), urt::priority); },
          "asio::require(urt::executor, urt::priority): level -1 is outside 0..99 (use "
          "urt::priority(p))"),
      reject<std::invalid_argument>(
          "executor: task_spec.priority 120",
          [&] { (void)rt.executor(urt::task_spec{.priority = 120}); },
          "runtime::executor: task_spec.priority: 120 is outside 0..99"),
      reject<std::invalid_argument>(
          "executor: task_spec.priority -1",
          [&] { (void)rt.executor(urt::task_spec{.priority = -1}); },
          "runtime::executor: task_spec.priority: -1 is outside 0..99"),
      reject<std::invalid_argument>(
          "executor: task_spec.affinity, empty",
          [&] { (void)rt.executor(urt::task_spec{.affinity = urt::worker_set{}}); },
          "runtime::executor: task_spec.affinity: the set is empty"),
      reject<std::invalid_argument>(
          "executor: task_spec.affinity, a worker past the last",
          [&] { (void)rt.executor(urt::task_spec{.affinity = urt::worker_set{5}}); },
          "runtime::executor: task_spec.affinity: worker 5 does not exist (the runtime has "
          "workers 0-3)"),
      reject<std::invalid_argument>(
          "executor: task_spec.group of another runtime",
          [&] { (void)rt.executor(urt::task_spec{.group = foreign}); },
          "runtime::executor: task_spec.group: group 1 belongs to another runtime"),
      reject<std::length_error>(
          "executor beyond max_executor_affinities distinct affinities",
          [] {
            // 13 workers: 8191 non-empty sets, more than the 4096 allowed.
            urt::runtime many(synthetic_options(13));
            const auto set_of = [](unsigned bits) {
              urt::worker_set s;
              for (unsigned w = 0; w < 13; ++w) {
                if ((bits >> w & 1U) != 0) s.add(w);
              }
              return s;
            };
            for (unsigned bits = 1; bits <= urt::runtime::max_executor_affinities; ++bits) {
              (void)many.executor(urt::task_spec{.affinity = set_of(bits)});
            }
            try {
              (void)many.executor(urt::task_spec{.affinity = set_of(1)});  // known: still fine
            } catch (const std::length_error&) {
              throw std::logic_error("an affinity already known was refused");
            }
            (void)many.executor(
                urt::task_spec{.affinity = set_of(urt::runtime::max_executor_affinities + 1)});
          },
          "runtime::executor: task_spec.affinity: 4096 distinct executor affinities exist "
          "already (runtime::max_executor_affinities)"),
      reject<urt::runtime_stopped>(
          "executor of a stopped runtime",
          [&] { (void)stopped.executor(); },
          "runtime::executor: the runtime is stopping or stopped"),
      // Executing on a stopped runtime's executor is not rejected: the
      // function is destroyed unrun (executor_test.cpp says why).
  };

#ifdef URT_BAD_INPUT_CYCLICTEST
  const std::string wait_limit = " is above 1000000000ns (1 s)";
  const std::vector<row> cli_rows = {
      cli({"--cpupri=bytes"}, "--cpupri: 'bytes' is not global, per_numa, per_llc or per_llc_bytes"),
      cli({"--migration=push"}, "--migration: 'push' is not push_ipi, pull or none"),
      cli({"--overrun=drop"}, "--overrun: 'drop' is not skip or catch_up"),
      cli({"--cid=scan"}, "--cid: 'scan' is not batched_scan or ownership"),
      cli({"--timer-wake=early"}, "--timer-wake: 'early' is not at_release or adaptive"),
      cli({"--timer-wake"}, "--timer-wake: missing value"),
      cli({"--idle-spin-policy=sometimes"},
          "--idle-spin-policy: 'sometimes' is not adaptive or fixed"),
      cli({"--policy=rr"}, "--policy: 'rr' is not other or fifo"),
      cli({"--bogus"}, "unknown or malformed option '--bogus'"),
      cli({"--t"},  // ambiguous abbreviation
          "unknown option '--t' (long options are taken only in full: --threads, --throttle, "
          "--timer-spin, --timer-wake, --topology or --tracemark)"),
      cli({"--quiet=1"}, "unknown or malformed option '--quiet=1'"),
      cli({"--help=me"}, "unknown or malformed option '--help=me'"),
      cli({"-z"}, "unknown option '-z'"),
      cli({"-X"}, "unknown option '-X'"),  // named in cyclictest's help, not one of its flags
      cli({"-qz"}, "unknown option '-z'"),
      cli({"-a", "0-1", "stray"}, "unexpected argument 'stray'"),
      cli({"-t", "x"}, "unexpected argument 'x'"),
      cli({"--affinity="}, "-a/--affinity: '' is an empty cpulist"),
      cli({"-i", "abc"}, "-i/--interval: 'abc' is not a non-negative whole number"),
      cli({"-i", "-5"}, "-i/--interval: '-5' is not a non-negative whole number"),
      cli({"-i", "1.5"}, "-i/--interval: '1.5' is not a non-negative whole number"),
      cli({"-i", "0"}, "-i/--interval: '0' is out of range 1..1099511627776"),
      cli({"-i", "1099511627777"}, "-i/--interval: '1099511627777' is out of range 1..1099511627776"),
      cli({"-i", "99999999999999999999"},
          "-i/--interval: '99999999999999999999' is out of range 1..1099511627776"),
      cli({"-i"}, "-i/--interval: missing value"),
      cli({"--interval"}, "-i/--interval: missing value"),
      cli({"-p", "100"}, "-p/--priority: '100' is out of range 0..99"),
      cli({"-p", "-1"}, "-p/--priority: '-1' is not a non-negative whole number"),
      cli({"-p", "high"}, "-p/--priority: 'high' is not a non-negative whole number"),
      cli({"-t0"},
          "-t/--threads: '0' is out of range 1..1024 (as in cyclictest; -t alone, or -t 0 apart, "
          "runs one per CPU)"),
      cli({"--threads=0"},
          "-t/--threads: '0' is out of range 1..1024 (as in cyclictest; -t alone, or -t 0 apart, "
          "runs one per CPU)"),
      cli({"-t", "1025"}, "-t/--threads: '1025' is out of range 1..1024"),
      cli({"--threads=abc"}, "-t/--threads: 'abc' is not a non-negative whole number"),
      cli({"-d", "-3"}, "-d/--distance: '-3' is not a non-negative whole number"),
      cli({"-d", "1099511627777"}, "-d/--distance: '1099511627777' is out of range 0..1099511627776"),
      cli({"-t", "3", "-i", "1", "-d", "1099511627776"},
          "-d/--distance: '1099511627776' gives thread 2 an interval of 1 + 2 * 1099511627776 us, "
          "above the limit of 1099511627776 us"),
      cli({"-l", "-1"}, "-l/--loops: '-1' is not a non-negative whole number"),
      cli({"-l", "ten"}, "-l/--loops: 'ten' is not a non-negative whole number"),
      cli({"-l", "9223372036854775808"},
          "-l/--loops: '9223372036854775808' is out of range 0..9223372036854775807"),
      cli({"-D", "10x"},
          "-D/--duration: '10x' is not a duration (a whole number with an optional s, m, h or d)"),
      cli({"-D", "m"},
          "-D/--duration: 'm' is not a duration (a whole number with an optional s, m, h or d)"),
      cli({"-D", "-1"},
          "-D/--duration: '-1' is not a duration (a whole number with an optional s, m, h or d)"),
      cli({"-D", "ms"},
          "-D/--duration: 'ms' is not a duration (a whole number with an optional s, m, h or d)"),
      cli({"-D", "4294967297"},
          "-D/--duration: '4294967297' is out of range: at most 4294967296 s (about 136 years)"),
      cli({"-D", "49711d"},
          "-D/--duration: '49711d' is out of range: at most 4294967296 s (about 136 years)"),
      cli({"-h", "abc"}, "-h/--histogram: 'abc' is not a non-negative whole number"),
      cli({"-h", "1000001"}, "-h/--histogram: '1000001' is out of range 1..1000000"),
      cli({"-h", "0"}, "-h/--histogram: '0' is out of range 1..1000000"),
      cli({"--histo=5"},  // ambiguous in cyclictest (--histofall)
          "unknown option '--histo=5' (long options are taken only in full: --histofall or "
          "--histogram)"),
      cli({"--histog=5"},
          "unknown option '--histog=5' (long options are taken only in full: --histogram)"),
      cli({"--quie"}, "unknown option '--quie' (long options are taken only in full: --quiet)"),
      cli({"--fifo=/tmp/pipe"},
          "-F/--fifo: '/tmp/pipe' is not supported: urt-cyclictest writes no status to a named "
          "pipe (the SCHED_FIFO priority of urt's workers is --urt-fifo-priority)"),
      cli({"-F", "/tmp/pipe"},
          "-F/--fifo: '/tmp/pipe' is not supported: urt-cyclictest writes no status to a named "
          "pipe (the SCHED_FIFO priority of urt's workers is --urt-fifo-priority)"),
      // cyclictest 2.40's flags urt-cyclictest takes, with bad values.
      cli({"--aligned=x"}, "-A/--aligned: 'x' is not a non-negative whole number"),
      cli({"-A", "1099511627777"},
          "-A/--aligned: '1099511627777' is out of range 0..1099511627776"),
      cli({"-A", "--secaligned"},
          "-A/--aligned and --secaligned: only one of them may be given, as in cyclictest"),
      cli({"-b", "-1"}, "-b/--breaktrace: '-1' is not a non-negative whole number"),
      cli({"--breaktrace=2147483648"},
          "-b/--breaktrace: '2147483648' is out of range 0..2147483647"),
      cli({"-b"}, "-b/--breaktrace: missing value"),
      // cyclictest 2.40's flags without a meaning for urt, each with the reason (-c but 0).
      cli({"-c", "1"},
          "-c/--clock: '1' is not supported: urt's releases are on CLOCK_MONOTONIC only "
          "(-c 0)"),
      cli({"--clock=1"},
          "-c/--clock: '1' is not supported: urt's releases are on CLOCK_MONOTONIC only "
          "(-c 0)"),
      cli({"-H", "0"}, "-H/--histofall: '0' is out of range 1..1000000"),
      cli({"--histofall=x"}, "-H/--histofall: 'x' is not a non-negative whole number"),
      cli({"--mainaffinity=x"},
          "--mainaffinity: 'x' is not a cpulist (unexpected 'x'); expected e.g. \"0-3,8\""),
      cli({"--mainaffinity", "3-1"},
          "--mainaffinity: '3-1' is not a cpulist (range 3-1 is reversed); expected e.g. "
          "\"0-3,8\""),
      cli({"-o", "10"},
          "-o/--oscope: '10' needs -v/--verbose, as in cyclictest (it reduces the per-sample "
          "output)"),
      cli({"-v", "--oscope=0"}, "-o/--oscope: '0' is out of range 1..2147483647"),
      cli({"-t", "3", "-p", "1", "--priospread"},
          "--priospread: -p/--priority '1' with -t/--threads '3' gives thread 2 the priority "
          "1 - 2, below 0 (cyclictest fails there): at least -p 2 for 3 threads"),
      cli({"--priospread", "-t", "99"},
          "--priospread: without -p/--priority the first thread's priority would be "
          "-t/--threads '99' + 1 = 100, above the maximum of 99 (cyclictest's default); give -p"),
      cli({"-r"},
          "-r/--relative is not supported: urt releases its periodic tasks at absolute "
          "times (an absolute timerfd on CLOCK_MONOTONIC); there is no relative timer"),
      cli({"--relative"},
          "-r/--relative is not supported: urt releases its periodic tasks at absolute "
          "times (an absolute timerfd on CLOCK_MONOTONIC); there is no relative timer"),
      cli({"-R"},
          "-R/--resolution is not supported: checking the clock_gettime() resolution is "
          "not implemented"),
      cli({"--resolution"},
          "-R/--resolution is not supported: checking the clock_gettime() resolution is "
          "not implemented"),
      cli({"--secaligned=99999999999999999999"},
          "--secaligned: '99999999999999999999' is out of range 0..1099511627776"),
      cli({"-s"},
          "-s/--system is not supported: sys_nanosleep and sys_setitimer are the kernel "
          "tool's timers; urt's workers wait on the runtime's timerfd"),
      cli({"--system"},
          "-s/--system is not supported: sys_nanosleep and sys_setitimer are the kernel "
          "tool's timers; urt's workers wait on the runtime's timerfd"),
      cli({"--smi"},
          "--smi is not supported: SMI counting reads an Intel MSR from the kernel tool's "
          "threads; urt-cyclictest does not count SMIs"),
      cli({"--spike=-1"}, "--spike: '-1' is not a non-negative whole number"),
      cli({"--spike=5", "--spike-nodes=1048577"},
          "--spike-nodes: '1048577' is out of range 0..1048576"),
      cli({"--tracemark"},
          "--tracemark is not supported: writing a trace mark when -b is exceeded is "
          "ftrace tracing of the kernel tool"),
      cli({"--dbg_cyclictest"},
          "--dbg_cyclictest is not supported: it prints the kernel tool's own debugging "
          "information; urt-cyclictest has none"),
      cli({"-x"},
          "-x/--posix_timers is not supported: POSIX timers are the kernel tool's timers; "
          "urt's workers wait on the runtime's timerfd"),
      cli({"--posix_timers"},
          "-x/--posix_timers is not supported: POSIX timers are the kernel tool's timers; "
          "urt's workers wait on the runtime's timerfd"),
      cli({"--fifo-priority=80"},
          "unknown option '--fifo-priority=80': urt's worker priority flag is --urt-fifo-priority"),
      cli({"--histfile="}, "--histfile: '' is an empty path"),
      cli({"--latency=-1"}, "--latency: '-1' is not a non-negative whole number"),
      cli({"--latency=5us"}, "--latency: '5us' is not a non-negative whole number"),
      cli({"--latency=2000000001"}, "--latency: '2000000001' is out of range 0..2000000000"),
      cli({"--latency"}, "--latency: missing value"),
      cli({"--laptop=1"}, "unknown or malformed option '--laptop=1'"),
      cli({"--urt-summary=1"}, "unknown or malformed option '--urt-summary=1'"),
      cli({"--urt-summar"},
          "unknown option '--urt-summar' (long options are taken only in full: --urt-summary)"),
      cli({"--json="}, "--json: '' is an empty path"),
      cli({"--json"}, "--json: missing value"),
      cli({"--topology=numa"}, "--topology: 'numa' is not system, synthetic:DESCRIPTION or xml:PATH"),
      cli({"--topology=synthetic:"},
          "--topology: 'synthetic:' is not system, synthetic:DESCRIPTION or xml:PATH"),
      cli({"--topology=xml:"}, "--topology: 'xml:' is not system, synthetic:DESCRIPTION or xml:PATH"),
      cli({"--topology=synthetic:garbage"},
          "--topology: 'synthetic:garbage': runtime_options.topology.synthetic: cannot parse "
          "\"garbage\""),
      cli({"--topology=synthetic:pu:2000"},
          "--topology: 'synthetic:pu:2000': runtime_options.topology.synthetic: \"pu:2000\" has "
          "2000 PUs, more than urt::max_workers (1024)"),
      cli({"--topology=xml:" + missing},
          "--topology: 'xml:" + missing + "': runtime_options.topology.xml: cannot read " +
              q(missing) + ": No such file or directory"),
      cli({"--topology=synthetic:pack:1 core:4 pu:1", "-a", "0-9"},
          "-a/--affinity: '0-9': runtime_options.cpus: PU 4 is not in the allowed set \"0-3\""),
      cli({"--topology=synthetic:pack:1 core:4 pu:1", "-a", "0-x"},
          "-a/--affinity: '0-x': runtime_options.cpus: \"0-x\" is not a cpulist (unexpected "
          "'x'); expected e.g. \"0-3,8\""),
      cli({"--timer-spin=-1"}, "--timer-spin: '-1' is not a non-negative whole number"),
      cli({"--timer-spin=5us"}, "--timer-spin: '5us' is not a non-negative whole number"),
      cli({"--timer-spin=1000001"},
          "--timer-spin: '1000001': runtime_options.timer_spin: 1000001000ns" + wait_limit),
      cli({"--idle-spin=x"}, "--idle-spin: 'x' is not a non-negative whole number"),
      cli({"--idle-spin=1099511627776"},
          "--idle-spin: '1099511627776': runtime_options.idle_spin: 1099511627776000ns" +
              wait_limit),
      cli({"--ipi-timeout=0"}, "--ipi-timeout: '0' is out of range 1..1000000"),
      cli({"--ipi-timeout=1000001"}, "--ipi-timeout: '1000001' is out of range 1..1000000"),
      cli({"--urt-fifo-priority=0"}, "--urt-fifo-priority: '0' is out of range 1..99"),
      cli({"--urt-fifo-priority=100"}, "--urt-fifo-priority: '100' is out of range 1..99"),
      cli({"--load=4"}, "--load: '4' is not N:PRIO (no colon)"),
      cli({"--load=a:b"}, "--load: 'a:b' is not N:PRIO with N in 0..1000 and PRIO in 0..99"),
      cli({"--load=2:100"}, "--load: '2:100' is not N:PRIO with N in 0..1000 and PRIO in 0..99"),
      cli({"--load=1001:5"}, "--load: '1001:5' is not N:PRIO with N in 0..1000 and PRIO in 0..99"),
      cli({"--load=:5"}, "--load: ':5' is not N:PRIO with N in 0..1000 and PRIO in 0..99"),
      cli({"--throttle=sometimes"}, "--throttle: 'sometimes' is not off, deferred or strict"),
      cli({"--throttle="}, "--throttle: '' is not off, deferred or strict"),
      cli({"--throttle"}, "--throttle: missing value"),
      cli({"--bandwidth"}, "--bandwidth: missing value"),
      cli({"--bandwidth=12000/10000"}, "--bandwidth: '12000/10000' has a runtime above its period"),
      cli({"--bandwidth=9500/0"}, "--bandwidth: '9500/0' has a zero period"),
      cli({"--bandwidth=0/0"}, "--bandwidth: '0/0' has a zero period"),
      cli({"--bandwidth=-1/10000"}, "--bandwidth: '-1/10000' has a negative runtime"),
      cli({"--bandwidth=9500/-10000"}, "--bandwidth: '9500/-10000' has a negative period"),
      cli({"--bandwidth=9500"},
          "--bandwidth: '9500' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"),
      cli({"--bandwidth=9500/"},
          "--bandwidth: '9500/' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"),
      cli({"--bandwidth=/10000"},
          "--bandwidth: '/10000' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"),
      cli({"--bandwidth=9.5/10"},
          "--bandwidth: '9.5/10' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"),
      cli({"--bandwidth=9500us/10ms"},
          "--bandwidth: '9500us/10ms' is not RUNTIME/PERIOD in whole microseconds (e.g. "
          "9500/10000)"),
      cli({"--bandwidth=1/2/3"},
          "--bandwidth: '1/2/3' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"),
      cli({"--bandwidth=1/3600000001"},
          "--bandwidth: '1/3600000001' has a period above the maximum of 3600000000 us"),
      cli({"--bandwidth=1/99999999999999999999999"},
          "--bandwidth: '1/99999999999999999999999' has a period above the maximum of "
          "3600000000 us"),
      cli({"--bandwidth=99999999999999999999999/10000"},
          "--bandwidth: '99999999999999999999999/10000' has a runtime above its period"),
      cli({"--bandwidth=0/10000", "--throttle=strict"},
          "--bandwidth: '0/10000' has a runtime of 0, which under --throttle strict would never "
          "run a FIFO task"),
      cli({"--throttle=strict", "--bandwidth=0/10000"},
          "--bandwidth: '0/10000' has a runtime of 0, which under --throttle strict would never "
          "run a FIFO task"),
      cli({"-t", "1024", "-h", "1000000"},
          "-h/--histogram: '1000000' with -t/--threads '1024' needs 16384000000 bytes of "
          "histograms (1024 threads x 1000000 buckets x 16 bytes), above the limit of 1073741824 "
          "bytes (1 GiB): at most -h 65536 for 1024 threads"),
      cli({"-t", "68", "-h", "1000000"},
          "-h/--histogram: '1000000' with -t/--threads '68' needs 1088000000 bytes of histograms "
          "(68 threads x 1000000 buckets x 16 bytes), above the limit of 1073741824 bytes "
          "(1 GiB): at most -h 986895 for 68 threads"),
      cli({"--topology=synthetic:pu:68", "-t", "-h", "1000000"},
          "-h/--histogram: '1000000' with -t/--threads (one per worker: 68) needs 1088000000 "
          "bytes of histograms (68 threads x 1000000 buckets x 16 bytes), above the limit of "
          "1073741824 bytes (1 GiB): at most -h 986895 for 68 threads"),
  };
  rows.insert(rows.end(), cli_rows.begin(), cli_rows.end());
  CHECK(cli_rows.size() >= 60);
#endif

  CHECK(rows.size() >= 60);
  MESSAGE(rows.size(), " rows");
  for (const row& r : rows) {
    INFO("row: ", r.name);
    std::string thrown_type = "nothing thrown";
    std::string message;
    try {
      r.input();
    } catch (const std::exception& e) {
      thrown_type = type_name(typeid(e));
      message = e.what();
    } catch (...) {
      thrown_type = "an exception not derived from std::exception";
    }
    CHECK(thrown_type == type_name(r.type));
    CHECK(message == r.message);
  }

  // Nothing a row did was accepted: the shared runtime ran only the one
  // task whose stop() was refused, and still runs.
  rt.stop();
  const urt::worker_stats total = rt.stats().total();
  CHECK(total.accepted == 1);
  CHECK(total.completed == 1);
  CHECK(total.cancelled == 0);
}
