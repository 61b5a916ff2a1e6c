// Tests of urt-cyclictest: option parsing (every bad flag rejected, naming
// the flag and the value), the cyclictest histogram and JSON formats,
// percentile math, and short real runs of the binary. No assertion is about
// a latency value or a duration (the -b and --spike runs count only on every
// wake-up being later than 1 ns, with -N and --timer-wake=at_release).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "stats.hpp"

#ifndef URT_CYCLICTEST_PATH
#error "URT_CYCLICTEST_PATH must name the urt-cyclictest binary"
#endif

using namespace urt_cyclictest;

namespace {

parse_result parse(std::vector<std::string> args) {
  args.insert(args.begin(), "urt-cyclictest");
  return parse_options(args);
}

// --- a minimal JSON reader: enough to check the output parses and read it ---
struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, json_array, json_object> v;
  [[nodiscard]] const json& operator[](const std::string& key) const {
    const auto& o = std::get<json_object>(v);
    const auto it = o.find(key);
    if (it == o.end()) throw std::out_of_range("no key " + key);
    return it->second;
  }
  [[nodiscard]] bool has(const std::string& key) const {
    return std::get<json_object>(v).count(key) != 0;
  }
  [[nodiscard]] double num() const { return std::get<double>(v); }
  [[nodiscard]] const std::string& str() const { return std::get<std::string>(v); }
  [[nodiscard]] const json_object& obj() const { return std::get<json_object>(v); }
};

class json_reader {
 public:
  explicit json_reader(std::string text) : s_(std::move(text)) {}
  json parse() {
    json j = value();
    ws();
    if (i_ != s_.size()) fail("trailing text");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    ws();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) fail("bad escape");
        c = s_[i_++];
        switch (c) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'u':
            out += '?';
            i_ += 4;
            break;
          default:
            out += c;
        }
      } else {
        if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
        out += c;
      }
    }
    expect('"');
    return out;
  }
  json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      json_object o;
      if (!peek('}')) {
        do {
          std::string k = string();
          expect(':');
          if (o.count(k) != 0) fail("duplicate key " + k);
          o.emplace(std::move(k), value());
        } while (peek(',') && (++i_, true));
      }
      expect('}');
      return json{std::move(o)};
    }
    if (c == '[') {
      ++i_;
      json_array a;
      if (!peek(']')) {
        do {
          a.push_back(value());
        } while (peek(',') && (++i_, true));
      }
      expect(']');
      return json{std::move(a)};
    }
    if (c == '"') return json{string()};
    if (s_.compare(i_, 4, "true") == 0) return i_ += 4, json{true};
    if (s_.compare(i_, 5, "false") == 0) return i_ += 5, json{false};
    if (s_.compare(i_, 4, "null") == 0) return i_ += 4, json{nullptr};
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(s_.substr(i_, 32), &used);
    } catch (const std::exception&) {
      fail("bad value");
    }
    i_ += used;
    return json{d};
  }
  std::string s_;
  std::size_t i_ = 0;
};

json parse_json(const std::string& text) { return json_reader(text).parse(); }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A unique temporary file name (the file is created empty); removed on scope exit.
struct temp_file {
  explicit temp_file(const char* tag) {
    std::string pattern = (std::filesystem::temp_directory_path() /
                           (std::string("urt-cyclictest-") + tag + "-XXXXXX"))
                              .string();
    const int fd = mkstemp(pattern.data());
    REQUIRE(fd >= 0);
    close(fd);
    path = pattern;
  }
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  std::string path;
};

/// Runs the binary with `args` (a shell fragment); returns its exit status.
int run_binary(const std::string& args, const std::string& out_path = "/dev/null",
               const std::string& err_path = "/dev/null") {
  const std::string cmd =
      std::string("'") + URT_CYCLICTEST_PATH + "' " + args + " >" + out_path + " 2>" + err_path;
  const int st = std::system(cmd.c_str());
  REQUIRE(st != -1);
  REQUIRE(WIFEXITED(st));
  return WEXITSTATUS(st);
}

/// CPUs this process may run on (urt-cyclictest's workers by default).
int allowed_cpu_count() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  return CPU_COUNT(&mine);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

}  // namespace

// ---------------------------------------------------------------- options

TEST_CASE("options: defaults are cyclictest's") {
  const parse_result r = parse({});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == 1);
  CHECK(r.opts.priority == 0);
  CHECK(r.opts.interval_us == 1000);
  CHECK(r.opts.distance_us == 500);
  CHECK(r.opts.loops == 0);
  CHECK(r.opts.duration_s == 0);
  CHECK_FALSE(r.opts.affinity);
  CHECK_FALSE(r.opts.mlockall);
  CHECK_FALSE(r.opts.quiet);
  CHECK(r.opts.histogram_us == 0);
  CHECK(r.opts.effective_policy() == urt::worker_policy::other);
  CHECK(r.opts.runtime_options().lock_memory == urt::memory_lock::none);
}

TEST_CASE("options: cyclictest's flags in their spellings") {
  parse_result r = parse({"-t", "2", "-p", "80", "-i", "200", "-d", "100", "-l", "5000", "-m", "-q",
                          "-h", "400", "--histfile=/tmp/h", "--json=/tmp/j", "-D", "2m"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == 2);
  CHECK(r.opts.priority == 80);
  CHECK(r.opts.interval_us == 200);
  CHECK(r.opts.distance_us == 100);
  CHECK(r.opts.loops == 5000);
  CHECK(r.opts.mlockall);
  CHECK(r.opts.quiet);
  CHECK(r.opts.histogram_us == 400);
  CHECK(r.opts.histfile == "/tmp/h");
  CHECK(r.opts.json == "/tmp/j");
  CHECK(r.opts.duration_s == 120);
  // -p > 0 means SCHED_FIFO workers at that priority, as cyclictest's threads.
  CHECK(r.opts.effective_policy() == urt::worker_policy::fifo);
  CHECK(r.opts.effective_fifo_priority() == 80);
  CHECK(r.opts.policy_implicit());
  CHECK(r.opts.runtime_options().lock_memory == urt::memory_lock::all);
  // With -h every thread runs at the same interval (cyclictest ignores -d).
  CHECK(r.opts.interval_of(0) == 200);
  CHECK(r.opts.interval_of(3) == 200);

  r = parse({"--threads=3", "--priority=5", "--interval=300", "--distance=50", "--loops=7",
             "--mlockall", "--quiet", "--duration=1h"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == 3);
  CHECK(r.opts.priority == 5);
  CHECK(r.opts.interval_of(0) == 300);
  CHECK(r.opts.interval_of(2) == 400);  // no -h: interval + n * distance
  CHECK(r.opts.duration_s == 3600);

  r = parse({"-t"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == -1);  // one per worker
  r = parse({"-t4"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == 4);
  r = parse({"-q", "-t", "-l", "3"});  // -t followed by an option: one per worker
  REQUIRE(r.ok());
  CHECK(r.opts.threads == -1);
  CHECK(r.opts.loops == 3);

  r = parse({"-a"});
  REQUIRE(r.ok());
  CHECK(r.opts.affinity);
  CHECK(r.opts.affinity_cpus.empty());
  r = parse({"-a", "0-1", "-t"});
  REQUIRE(r.ok());
  CHECK(r.opts.affinity_cpus == "0-1");
  CHECK(r.opts.runtime_options().cpus == "0-1");
  r = parse({"--affinity=1"});
  REQUIRE(r.ok());
  CHECK(r.opts.affinity_cpus == "1");

  for (const auto& [text, seconds] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"10", 10}, {"10s", 10}, {"3m", 180}, {"2h", 7200}, {"1d", 86400}, {"0", 0},
           {"2M", 120}, {"1H", 3600}, {"1D", 86400}}) {
    CAPTURE(text);
    CHECK(parse_duration(text) == seconds);
  }
}

TEST_CASE("options: cyclictest's readings of -t 0, -D with text after the unit, --policy=other -p") {
  // -t 0 apart: cyclictest's atoi() gives 0 and it runs one thread per CPU.
  parse_result r = parse({"-t", "0", "-q"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == -1);
  r = parse({"-t", "00"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == -1);
  r = parse({"-t", "3"});
  REQUIRE(r.ok());
  CHECK(r.opts.threads == 3);
  // Attached, cyclictest rejects 0.
  CHECK(parse({"-t0"}).error ==
        "-t/--threads: '0' is out of range 1..1024 (as in cyclictest; -t alone, or -t 0 apart, "
        "runs one per CPU)");

  // -D: the number and one unit; what follows the unit is ignored, as
  // cyclictest's parse_time_string() does, and said on stderr.
  for (const auto& [text, seconds] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"1m5", 60}, {"10ms", 600}, {"2h30m", 7200}, {"1s5", 1}}) {
    CAPTURE(text);
    CHECK(parse_duration(text) == seconds);
    r = parse({"-D", text});
    REQUIRE(r.ok());
    CHECK(r.opts.duration_s == seconds);
    REQUIRE(r.warnings.size() == 1);
    CHECK(r.warnings[0].find("-D/--duration: '" + text + "' is read as " +
                             std::to_string(seconds) + " s") == 0);
  }
  CHECK(parse({"-D", "1m"}).warnings.empty());
  CHECK_FALSE(parse_duration("10x"));
  CHECK_FALSE(parse_duration("m5"));

  // --policy=other with -p > 0: cyclictest sets SCHED_FIFO, warning when
  // the policy came after the priority.
  r = parse({"-p", "80", "--policy=other"});
  REQUIRE(r.ok());
  CHECK(r.opts.effective_policy() == urt::worker_policy::fifo);
  CHECK(r.opts.effective_fifo_priority() == 80);
  CHECK(r.opts.policy_implicit());  // falls back to other when refused, as without --policy
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0] ==
        "--policy: 'other' and -p/--priority: '80' don't match: setting policy to SCHED_FIFO, as "
        "cyclictest does");
  r = parse({"--policy=other", "-p", "80"});
  REQUIRE(r.ok());
  CHECK(r.opts.effective_policy() == urt::worker_policy::fifo);
  CHECK(r.warnings.empty());  // cyclictest's -p switches it silently
  // -p 0 too (cyclictest 2.40, run here: "defaulting realtime priority to
  // 2" and P: 2 for --policy=other -p 0; P: 0 for -p 0 --policy=other).
  r = parse({"--policy=other", "-p", "0"});
  REQUIRE(r.ok());
  CHECK(r.opts.effective_policy() == urt::worker_policy::fifo);
  CHECK(r.opts.priority == 2);
  r = parse({"-p", "0", "--policy=other"});
  REQUIRE(r.ok());
  CHECK(r.opts.effective_policy() == urt::worker_policy::other);
  CHECK(r.opts.priority == 0);
  CHECK(r.warnings.empty());

  // Long options only in full; a full name is still taken with its value
  // apart or attached.
  CHECK(parse({"--histogram", "5"}).opts.histogram_us == 5);
  CHECK(parse({"--histogram=5"}).opts.histogram_us == 5);
  CHECK(parse({"--histfile", "/tmp/h", "-h", "3"}).opts.histfile == "/tmp/h");
  CHECK(parse({"--json", "--histfile"}).opts.json == "--histfile");  // a value, as getopt takes it
  CHECK(parse({"--threads"}).opts.threads == -1);
}

TEST_CASE("options: --laptop and --latency, cyclictest's PM QoS flags") {
  parse_result r = parse({});
  CHECK_FALSE(r.opts.laptop);
  CHECK(r.opts.latency_target_us == 0);  // cyclictest's default: hold 0 us
  r = parse({"--laptop", "--latency=25"});
  REQUIRE(r.ok());
  CHECK(r.opts.laptop);
  CHECK(r.opts.latency_target_us == 25);
  r = parse({"--latency", "2000000000"});
  REQUIRE(r.ok());
  CHECK(r.opts.latency_target_us == max_latency_target_us);
  CHECK(parse({"--latency=2000000001"}).error ==
        "--latency: '2000000001' is out of range 0..2000000000");
  CHECK(parse({"--latency=-5"}).error == "--latency: '-5' is not a non-negative whole number");
  CHECK(parse({"--lat=5"}).error ==
        "unknown option '--lat=5' (long options are taken only in full: --latency)");
}

TEST_CASE("options: urt's own flags") {
  parse_result r = parse({"--topology=synthetic:core:4 pu:1", "--timer-spin=50", "--idle-spin=0",
                          "--policy=fifo", "--urt-fifo-priority=70", "--load=2:10", "-p", "80"});
  REQUIRE(r.ok());
  CHECK(r.opts.topology.kind == urt::topology_kind::synthetic);
  CHECK(r.opts.topology.text == "core:4 pu:1");
  const urt::runtime_options ro = r.opts.runtime_options();
  CHECK(ro.timer_spin == std::chrono::microseconds{50});
  CHECK(ro.idle_spin == std::chrono::nanoseconds{0});
  CHECK(ro.policy == urt::worker_policy::fifo);
  CHECK(ro.fifo_priority == 70);
  CHECK_FALSE(r.opts.policy_implicit());
  CHECK(r.opts.load_tasks == 2);
  CHECK(r.opts.load_priority == 10);
  CHECK(ro.cpupri == urt::cpupri_layout::per_llc_bytes);  // the runtime's default
  for (const auto& [text, layout] :
       {std::pair{"global", urt::cpupri_layout::global},
        std::pair{"per_numa", urt::cpupri_layout::per_numa},
        std::pair{"per_llc", urt::cpupri_layout::per_llc},
        std::pair{"per_llc_bytes", urt::cpupri_layout::per_llc_bytes}}) {
    CAPTURE(text);
    const parse_result c = parse({std::string("--cpupri=") + text});
    REQUIRE(c.ok());
    CHECK(c.opts.runtime_options().cpupri == layout);
  }
  CHECK(ro.migration == urt::migration_mode::push_ipi);  // the runtime's default
  CHECK(ro.ipi_timeout == urt::runtime_options{}.ipi_timeout);
  for (const auto& [text, mode] : {std::pair{"push_ipi", urt::migration_mode::push_ipi},
                                   std::pair{"pull", urt::migration_mode::pull},
                                   std::pair{"none", urt::migration_mode::none}}) {
    CAPTURE(text);
    const parse_result c = parse({std::string("--migration=") + text, "--ipi-timeout=150"});
    REQUIRE(c.ok());
    CHECK(c.opts.runtime_options().migration == mode);
    CHECK(c.opts.runtime_options().ipi_timeout == std::chrono::microseconds{150});
  }

  CHECK(parse({}).opts.runtime_options().timer_wake == urt::runtime_options{}.timer_wake);
  CHECK(parse({"--timer-wake=at_release"}).opts.runtime_options().timer_wake ==
        urt::timer_wake_mode::at_release);
  CHECK(parse({"--timer-wake", "adaptive"}).opts.runtime_options().timer_wake ==
        urt::timer_wake_mode::adaptive);
  CHECK(parse({}).opts.runtime_options().idle_spin_policy == urt::runtime_options{}.idle_spin_policy);
  CHECK(parse({"--idle-spin-policy=fixed"}).opts.runtime_options().idle_spin_policy ==
        urt::spin_policy::fixed);
  CHECK(parse({"--idle-spin-policy", "adaptive"}).opts.runtime_options().idle_spin_policy ==
        urt::spin_policy::adaptive);

  CHECK(parse({}).opts.overrun == urt::overrun_policy::skip);  // as cyclictest
  CHECK(parse({"--overrun=catch_up"}).opts.overrun == urt::overrun_policy::catch_up);
  CHECK(parse({"--overrun", "skip"}).opts.overrun == urt::overrun_policy::skip);

  r = parse({"--topology=xml:/tmp/t.xml", "--policy=other"});
  REQUIRE(r.ok());
  CHECK(r.opts.topology.kind == urt::topology_kind::xml);
  CHECK(r.opts.runtime_options().policy == urt::worker_policy::other);
  // --policy=fifo alone: cyclictest's default priority, threads + 1 = 2,
  // which is also the workers' FIFO priority (--urt-fifo-priority: -p).
  r = parse({"--policy=fifo"});
  REQUIRE(r.ok());
  CHECK(r.opts.runtime_options().fifo_priority == 2);
  // Without --idle-spin the runtime's default stays.
  CHECK(parse({}).opts.runtime_options().idle_spin == urt::runtime_options{}.idle_spin);
}

TEST_CASE("options: every bad flag or value is rejected, naming the flag and the value") {
  struct bad_case {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::vector<bad_case> cases = {
      {{"--cpupri=bytes"}, {"--cpupri", "bytes"}},
      {{"--migration=push"}, {"--migration", "push"}},
      {{"--ipi-timeout=0"}, {"--ipi-timeout", "0"}},
      {{"--overrun=drop"}, {"--overrun", "drop"}},
      {{"--timer-wake=early"}, {"--timer-wake", "early"}},
      {{"--timer-wake"}, {"--timer-wake"}},
      {{"--idle-spin-policy=sometimes"}, {"--idle-spin-policy", "sometimes"}},
      {{"--bogus"}, {"--bogus"}},
      {{"-x"}, {"-x"}},
      {{"-qz"}, {"-z"}},
      {{"--quiet=1"}, {"--quiet=1"}},
      {{"-i", "abc"}, {"--interval", "abc"}},
      {{"-i", "-5"}, {"--interval", "-5"}},
      {{"-i", "0"}, {"--interval", "'0'"}},
      {{"-i", "1.5"}, {"--interval", "1.5"}},
      {{"-i"}, {"--interval", "missing"}},
      {{"--interval"}, {"--interval", "missing"}},
      {{"-p", "100"}, {"--priority", "100"}},
      {{"-p", "-1"}, {"--priority", "-1"}},
      {{"-p", "high"}, {"--priority", "high"}},
      {{"-t0"}, {"--threads", "'0'"}},
      {{"--threads=0"}, {"--threads", "'0'"}},
      {{"--threads=abc"}, {"--threads", "abc"}},
      {{"-t", "x"}, {"'x'"}},  // not a count: an unexpected argument
      {{"-d", "-3"}, {"--distance", "-3"}},
      {{"-l", "-1"}, {"--loops", "-1"}},
      {{"-l", "ten"}, {"--loops", "ten"}},
      {{"-D", "10x"}, {"--duration", "10x"}},
      {{"-D", "m"}, {"--duration", "'m'"}},
      {{"-D", "-1"}, {"--duration", "-1"}},
      {{"-D", "ms"}, {"--duration", "ms"}},
      {{"-h", "abc"}, {"--histogram", "abc"}},
      {{"-h", "2000000"}, {"--histogram", "2000000"}},
      {{"-h", "0"}, {"--histogram", "'0'"}},
      {{"--histo=5"}, {"--histo=5", "--histogram"}},  // cyclictest: ambiguous
      {{"--hist=5"}, {"--hist=5"}},
      {{"--histog=5"}, {"--histog=5", "in full"}},
      {{"--quie"}, {"--quie", "in full"}},
      {{"--fifo=/tmp/pipe"}, {"--fifo", "/tmp/pipe", "named pipe"}},
      {{"-F", "/tmp/pipe"}, {"-F/--fifo", "/tmp/pipe"}},
      {{"--fifo-priority=80"}, {"--fifo-priority=80", "--urt-fifo-priority"}},
      {{"--fifo-p=80"}, {"--fifo-p=80", "--urt-fifo-priority"}},
      {{"--histfile="}, {"--histfile"}},
      {{"--json="}, {"--json"}},
      {{"--json"}, {"--json", "missing"}},
      {{"--topology=numa"}, {"--topology", "numa"}},
      {{"--topology=synthetic:"}, {"--topology", "synthetic:"}},
      {{"--topology=xml:"}, {"--topology", "xml:"}},
      {{"--timer-spin=-1"}, {"--timer-spin", "-1"}},
      {{"--timer-spin=5us"}, {"--timer-spin", "5us"}},
      {{"--idle-spin=x"}, {"--idle-spin", "'x'"}},
      {{"--policy=rr"}, {"--policy", "rr"}},
      {{"--urt-fifo-priority=0"}, {"--urt-fifo-priority", "'0'"}},
      {{"--urt-fifo-priority=100"}, {"--urt-fifo-priority", "100"}},
      {{"--load=4"}, {"--load", "'4'", "colon"}},
      {{"--load=a:b"}, {"--load", "a:b"}},
      {{"--load=2:100"}, {"--load", "2:100"}},
      {{"--load=:5"}, {"--load", ":5"}},
      {{"-a", "0-1", "stray"}, {"stray"}},
  };
  for (const auto& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    CAPTURE(joined);
    const parse_result r = parse(c.args);
    CHECK_FALSE(r.ok());
    for (const auto& m : c.mentions) {
      CAPTURE(m);
      CAPTURE(r.error);
      CHECK(r.error.find(m) != std::string::npos);
    }
  }
}

TEST_CASE(
    "options: every flag of cyclictest 2.40, short and long, taken or rejected with its reason") {
  // One row per spelling of every flag in `cyclictest --help` (rt-tests
  // 2.40): what urt-cyclictest sets for it, or its exact message.
  using check = std::function<bool(const options&)>;
  struct row {
    std::vector<std::string> args;
    check sets;         // taken: what it sets
    std::string error;  // rejected: the exact message
    std::string warning = {};
  };
  const auto yes = [](std::vector<std::string> args, check sets, std::string warning = {}) {
    return row{std::move(args), std::move(sets), {}, std::move(warning)};
  };
  const auto no = [](std::vector<std::string> args, std::string error) {
    return row{std::move(args), nullptr, std::move(error)};
  };
  const auto smp = [](const options& o) {
    return o.smp && o.threads == -1 && o.affinity && o.affinity_cpus.empty();
  };
  const std::vector<row> rows = {
      yes({"-a"}, [](const options& o) { return o.affinity && o.affinity_cpus.empty(); }),
      yes({"--affinity"}, [](const options& o) { return o.affinity && o.affinity_cpus.empty(); }),
      yes({"-a", "0-1"}, [](const options& o) { return o.affinity && o.affinity_cpus == "0-1"; }),
      yes({"-a0-1"}, [](const options& o) { return o.affinity && o.affinity_cpus == "0-1"; }),
      yes({"--affinity=0-1"}, [](const options& o) { return o.affinity_cpus == "0-1"; }),
      yes({"-c", "0"}, [](const options&) { return true; }),  // CLOCK_MONOTONIC
      yes({"--clock=0"}, [](const options&) { return true; }),
      yes({"--default-system"}, [](const options& o) { return o.laptop; }),
      yes({"-d", "100"}, [](const options& o) { return o.distance_us == 100 && o.distance_given; }),
      yes({"--distance=100"}, [](const options& o) { return o.distance_us == 100; }),
      yes({"-D", "2m"}, [](const options& o) { return o.duration_s == 120; }),
      yes({"--duration=2m"}, [](const options& o) { return o.duration_s == 120; }),
      yes({"-h", "100"}, [](const options& o) { return o.histogram_us == 100; }),
      yes({"--histogram=100"}, [](const options& o) { return o.histogram_us == 100; }),
      yes({"--histfile=/tmp/h"}, [](const options& o) { return o.histfile == "/tmp/h"; }),
      yes({"-i", "200"}, [](const options& o) { return o.interval_us == 200; }),
      yes({"--interval=200"}, [](const options& o) { return o.interval_us == 200; }),
      yes({"--json=/tmp/j"}, [](const options& o) { return o.json == "/tmp/j"; }),
      yes({"--laptop"}, [](const options& o) { return o.laptop; }),
      yes({"--latency=10"}, [](const options& o) { return o.latency_target_us == 10; }),
      yes({"-l", "5"}, [](const options& o) { return o.loops == 5; }),
      yes({"--loops=5"}, [](const options& o) { return o.loops == 5; }),
      yes({"-m"}, [](const options& o) { return o.mlockall; }),
      yes({"--mlockall"}, [](const options& o) { return o.mlockall; }),
      yes({"-p", "80"},
          [](const options& o) {
            return o.priority == 80 && o.effective_policy() == urt::worker_policy::fifo;
          }),
      yes({"--priority=80"}, [](const options& o) { return o.priority == 80; }),
      // cyclictest 2.40: -p means SCHED_FIFO, and FIFO at 0 defaults to
      // threads + 1; --policy=other after -p 0 keeps SCHED_OTHER at 0.
      yes({"-p", "0"},
          [](const options& o) {
            return o.priority == 2 && o.effective_policy() == urt::worker_policy::fifo;
          },
          "-p/--priority 0: defaulting realtime priority to 2 (threads + 1), as cyclictest does"),
      yes({"--policy=other", "-p", "0"},
          [](const options& o) {
            return o.priority == 2 && o.effective_policy() == urt::worker_policy::fifo;
          },
          "-p/--priority 0: defaulting realtime priority to 2 (threads + 1), as cyclictest does"),
      yes({"-p", "0", "--policy=other"},
          [](const options& o) {
            return o.priority == 0 && o.effective_policy() == urt::worker_policy::other;
          }),
      yes({"--policy=fifo", "-p", "0"},
          [](const options& o) {
            return o.priority == 2 && o.effective_policy() == urt::worker_policy::fifo &&
                   !o.policy_implicit();  // an explicit FIFO is insisted on
          },
          "-p/--priority 0: defaulting realtime priority to 2 (threads + 1), as cyclictest does"),
      yes({"--policy=other"},
          [](const options& o) { return o.effective_policy() == urt::worker_policy::other; }),
      yes({"--policy=fifo"},
          [](const options& o) {
            return o.effective_policy() == urt::worker_policy::fifo && o.priority == 2;
          },
          "--policy=fifo without -p/--priority: defaulting realtime priority to 2 (threads + 1), "
          "as cyclictest does"),
      yes({"-q"}, [](const options& o) { return o.quiet; }),
      yes({"--quiet"}, [](const options& o) { return o.quiet; }),
      yes({"-S"}, smp),
      yes({"--smp"}, smp),
      yes({"-S", "-p", "90"}, [smp](const options& o) { return smp(o) && o.priority == 90; }),
      yes({"-S", "-t", "3"}, smp,
          "-t/--threads is ignored after -S/--smp, as cyclictest does (one thread per CPU)"),
      yes({"-t", "3", "-S"}, smp),
      yes({"-a", "1", "-S"}, smp,
          "-a/--affinity is ignored with -S/--smp, as cyclictest does (thread N runs on CPU N)"),
      yes({"-t"}, [](const options& o) { return o.threads == -1; }),
      yes({"--threads"}, [](const options& o) { return o.threads == -1; }),
      yes({"-t", "2"}, [](const options& o) { return o.threads == 2; }),
      yes({"-t2"}, [](const options& o) { return o.threads == 2; }),
      yes({"--threads=2"}, [](const options& o) { return o.threads == 2; }),
      yes({"--help"}, [](const options& o) { return o.help; }),
      yes({"-A"},
          [](const options& o) { return o.align == align_mode::aligned && o.align_offset_us == 0; }),
      yes({"--aligned"}, [](const options& o) { return o.align == align_mode::aligned; }),
      yes({"-A5"},
          [](const options& o) { return o.align == align_mode::aligned && o.align_offset_us == 5; }),
      yes({"-A", "5"}, [](const options& o) { return o.align_offset_us == 5; }),
      yes({"--aligned=5"},
          [](const options& o) { return o.align == align_mode::aligned && o.align_offset_us == 5; }),
      yes({"-b", "100"}, [](const options& o) { return o.breaktrace == 100; }),
      yes({"--breaktrace=100"}, [](const options& o) { return o.breaktrace == 100; }),
      yes({"-b", "0"}, [](const options& o) { return o.breaktrace == 0; }),  // cyclictest: off
      no({"-c", "1"},
         "-c/--clock: '1' is not supported: urt's releases are on CLOCK_MONOTONIC "
         "only (-c 0)"),
      no({"--clock=1"},
         "-c/--clock: '1' is not supported: urt's releases are on CLOCK_MONOTONIC "
         "only (-c 0)"),
      yes({"-H", "100"},
          [](const options& o) { return o.histofall && o.histogram_us == 100; }),
      yes({"--histofall=100"},
          [](const options& o) { return o.histofall && o.histogram_us == 100; }),
      yes({"--mainaffinity=0"},
          [](const options& o) {
            return o.main_affinity == "0" && o.main_affinity_cpus == std::vector<unsigned>{0};
          }),
      yes({"--mainaffinity", "0-2,5"},
          [](const options& o) {
            return o.main_affinity_cpus == std::vector<unsigned>{0, 1, 2, 5};
          }),
      yes({"-M"}, [](const options& o) { return o.refresh_on_max; }),
      yes({"--refresh_on_max"}, [](const options& o) { return o.refresh_on_max; }),
      yes({"-N"}, [](const options& o) { return o.nsecs && o.unit() == latency_unit::ns; }),
      yes({"--nsecs"}, [](const options& o) { return o.nsecs; }),
      yes({"-v", "-o", "10"}, [](const options& o) { return o.verbose && o.oscope == 10; }),
      yes({"--verbose", "--oscope=10"}, [](const options& o) { return o.oscope == 10; }),
      no({"-o", "10"},
         "-o/--oscope: '10' needs -v/--verbose, as in cyclictest (it reduces the per-sample "
         "output)"),
      no({"--oscope=10"},
         "-o/--oscope: '10' needs -v/--verbose, as in cyclictest (it reduces the per-sample "
         "output)"),
      yes({"-t", "3", "-p", "80", "--priospread"},
          [](const options& o) {
            return o.priospread && o.priority_of(0) == 80 && o.priority_of(2) == 78;
          }),
      yes({"--priospread"},
          [](const options& o) { return o.priospread && o.priority == 2; },
          "--priospread: no -p/--priority: defaulting realtime priority to 2 (threads + 1) and "
          "the policy to SCHED_FIFO, as cyclictest does"),
      yes({"-t", "3", "--priospread"},
          [](const options& o) {
            return o.priority == 4 && o.priority_of(2) == 2 &&
                   o.effective_policy() == urt::worker_policy::fifo;
          },
          "--priospread: no -p/--priority: defaulting realtime priority to 4 (threads + 1) and "
          "the policy to SCHED_FIFO, as cyclictest does"),
      no({"-r"},
         "-r/--relative is not supported: urt releases its periodic tasks at "
         "absolute times (an absolute timerfd on CLOCK_MONOTONIC); there is no "
         "relative timer"),
      no({"--relative"},
         "-r/--relative is not supported: urt releases its periodic tasks at "
         "absolute times (an absolute timerfd on CLOCK_MONOTONIC); there is no "
         "relative timer"),
      no({"-R"},
         "-R/--resolution is not supported: checking the clock_gettime() resolution "
         "is not implemented"),
      no({"--resolution"},
         "-R/--resolution is not supported: checking the clock_gettime() resolution "
         "is not implemented"),
      yes({"--secaligned"},
          [](const options& o) {
            return o.align == align_mode::secaligned && o.align_offset_us == 0;
          }),
      yes({"--secaligned=5"},
          [](const options& o) {
            return o.align == align_mode::secaligned && o.align_offset_us == 5;
          }),
      yes({"--secaligned", "5"}, [](const options& o) { return o.align_offset_us == 5; }),
      no({"-s"},
         "-s/--system is not supported: sys_nanosleep and sys_setitimer are the "
         "kernel tool's timers; urt's workers wait on the runtime's timerfd"),
      no({"--system"},
         "-s/--system is not supported: sys_nanosleep and sys_setitimer are the "
         "kernel tool's timers; urt's workers wait on the runtime's timerfd"),
      no({"--smi"},
         "--smi is not supported: SMI counting reads an Intel MSR from the kernel "
         "tool's threads; urt-cyclictest does not count SMIs"),
      yes({"--spike=100"}, [](const options& o) { return o.spike == 100 && o.spike_nodes == 1024; }),
      yes({"--spike=100", "--spike-nodes=8"},
          [](const options& o) { return o.spike == 100 && o.spike_nodes == 8; }),
      yes({"--spike-nodes=8"}, [](const options& o) { return o.spike == 0 && o.spike_nodes == 1024; },
          "--spike-nodes: '8' is ignored without a --spike before it, as cyclictest ignores it "
          "(the default, 1024 spikes, holds)"),
      no({"--tracemark"},
         "--tracemark is not supported: writing a trace mark when -b is exceeded is "
         "ftrace tracing of the kernel tool"),
      yes({"-u"}, [](const options& o) { return o.unbuffered; }),
      yes({"--unbuffered"}, [](const options& o) { return o.unbuffered; }),
      yes({"-v"}, [](const options& o) { return o.verbose && o.oscope == 1; }),
      yes({"--verbose"}, [](const options& o) { return o.verbose; }),
      no({"--dbg_cyclictest"},
         "--dbg_cyclictest is not supported: it prints the kernel tool's own "
         "debugging information; urt-cyclictest has none"),
      no({"-x"},
         "-x/--posix_timers is not supported: POSIX timers are the kernel tool's "
         "timers; urt's workers wait on the runtime's timerfd"),
      no({"--posix_timers"},
         "-x/--posix_timers is not supported: POSIX timers are the kernel tool's "
         "timers; urt's workers wait on the runtime's timerfd"),
      no({"-F", "/tmp/pipe"},
         "-F/--fifo: '/tmp/pipe' is not supported: urt-cyclictest writes no status "
         "to a named pipe (the SCHED_FIFO priority of urt's workers is "
         "--urt-fifo-priority)"),
      no({"--fifo=/tmp/pipe"},
         "-F/--fifo: '/tmp/pipe' is not supported: urt-cyclictest writes no status "
         "to a named pipe (the SCHED_FIFO priority of urt's workers is "
         "--urt-fifo-priority)"),
      no({"--policy=normal"}, "--policy: 'normal' is not other or fifo"),
      no({"--policy=batch"}, "--policy: 'batch' is not other or fifo"),
      no({"--policy=idle"}, "--policy: 'idle' is not other or fifo"),
      no({"--policy=rr"}, "--policy: 'rr' is not other or fifo"),
  };
  for (const row& r : rows) {
    std::string joined;
    for (const auto& a : r.args) joined += a + " ";
    CAPTURE(joined);
    const parse_result p = parse(r.args);
    if (r.sets) {
      CHECK(p.ok());
      CHECK(p.error == "");
      CHECK(r.sets(p.opts));
      if (r.warning.empty()) {
        CHECK(p.warnings.empty());
      } else {
        REQUIRE(p.warnings.size() == 1);
        CHECK(p.warnings[0] == r.warning);
      }
    } else {
      CHECK_FALSE(p.ok());
      CHECK(p.error == r.error);
    }
  }
}

TEST_CASE("options: the values of cyclictest's -A, -b, -H, -o, --secaligned, --spike, "
          "--mainaffinity, --priospread: every bad one named with its flag") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-b", "-1"}, "-b/--breaktrace: '-1' is not a non-negative whole number"},
      {{"-b", "2147483648"}, "-b/--breaktrace: '2147483648' is out of range 0..2147483647"},
      {{"--breaktrace=1us"}, "-b/--breaktrace: '1us' is not a non-negative whole number"},
      {{"-b"}, "-b/--breaktrace: missing value"},
      {{"-H", "0"}, "-H/--histofall: '0' is out of range 1..1000000"},
      {{"-H", "1000001"}, "-H/--histofall: '1000001' is out of range 1..1000000"},
      {{"--histofall=x"}, "-H/--histofall: 'x' is not a non-negative whole number"},
      {{"-v", "-o", "0"}, "-o/--oscope: '0' is out of range 1..2147483647"},
      {{"-v", "--oscope=-2"}, "-o/--oscope: '-2' is not a non-negative whole number"},
      {{"--oscope=5"},
       "-o/--oscope: '5' needs -v/--verbose, as in cyclictest (it reduces the per-sample "
       "output)"},
      {{"--aligned=x"}, "-A/--aligned: 'x' is not a non-negative whole number"},
      {{"-A", "1099511627777"}, "-A/--aligned: '1099511627777' is out of range 0..1099511627776"},
      {{"--secaligned=99999999999999999999"},
       "--secaligned: '99999999999999999999' is out of range 0..1099511627776"},
      {{"-A", "--secaligned"},
       "-A/--aligned and --secaligned: only one of them may be given, as in cyclictest"},
      {{"--secaligned=5", "-A5"},
       "-A/--aligned and --secaligned: only one of them may be given, as in cyclictest"},
      {{"--spike=-1"}, "--spike: '-1' is not a non-negative whole number"},
      {{"--spike=2147483648"}, "--spike: '2147483648' is out of range 0..2147483647"},
      {{"--spike=5", "--spike-nodes=1048577"},
       "--spike-nodes: '1048577' is out of range 0..1048576"},
      {{"--spike=5", "--spike-nodes=x"}, "--spike-nodes: 'x' is not a non-negative whole number"},
      {{"--mainaffinity=x"},
       "--mainaffinity: 'x' is not a cpulist (unexpected 'x'); expected e.g. \"0-3,8\""},
      {{"--mainaffinity=3-1"},
       "--mainaffinity: '3-1' is not a cpulist (range 3-1 is reversed); expected e.g. \"0-3,8\""},
      {{"--mainaffinity=65536"},
       "--mainaffinity: '65536' is not a cpulist (index 65536 exceeds 65535); expected e.g. "
       "\"0-3,8\""},
      {{"--mainaffinity="},
       "--mainaffinity: '' is not a cpulist (empty); expected e.g. \"0-3,8\""},
      {{"--mainaffinity"}, "--mainaffinity: missing value"},
      {{"-t", "3", "-p", "1", "--priospread"},
       "--priospread: -p/--priority '1' with -t/--threads '3' gives thread 2 the priority 1 - 2, "
       "below 0 (cyclictest fails there): at least -p 2 for 3 threads"},
      {{"--priospread", "-t", "99"},
       "--priospread: without -p/--priority the first thread's priority would be -t/--threads "
       "'99' + 1 = 100, above the maximum of 99 (cyclictest's default); give -p"},
  };
  for (const auto& [args, message] : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    CAPTURE(joined);
    CHECK(parse(args).error == message);
  }
  // The limits themselves are taken.
  CHECK(parse({"-b", "2147483647"}).opts.breaktrace == 2147483647);
  CHECK(parse({"-t", "3", "-p", "2", "--priospread"}).ok());  // thread 2 at priority 0
  CHECK(parse({"--priospread", "-t", "98"}).opts.priority == 99);
  CHECK(parse({"--secaligned=1099511627776"}).opts.align_offset_us == max_interval_us);
  // -t without a number: checked once the worker count is known.
  parse_result r = parse({"-t", "--priospread", "-p", "3"});
  REQUIRE(r.ok());
  std::vector<std::string> notes;
  CHECK(check_priospread(r.opts, 4, notes).empty());
  CHECK(check_priospread(r.opts, 5, notes) ==
        "--priospread: -p/--priority '3' with -t/--threads (one per worker: 5) gives thread 4 the "
        "priority 3 - 4, below 0 (cyclictest fails there): at least -p 4 for 5 threads");
  CHECK(notes.empty());
  r = parse({"-t", "--priospread", "--policy=other"});
  REQUIRE(r.ok());
  CHECK(r.opts.priority == 0);
  CHECK(check_priospread(r.opts, 2, notes).empty());
  CHECK(r.opts.priority == 3);  // cyclictest's default: threads + 1, and FIFO
  CHECK(r.opts.effective_policy() == urt::worker_policy::fifo);
  REQUIRE(notes.size() == 1);
  CHECK(check_priospread(r.opts, 4000000000u, notes).find("below 0") != std::string::npos);
  // --policy=fifo without -p: cyclictest's "defaulting realtime priority to"
  // threads + 1, capped at 99; an explicit -p or --policy=other keeps 0.
  CHECK(parse({"--policy=fifo", "-t", "2"}).opts.priority == 3);
  CHECK(parse({"--policy=fifo", "-t", "2"}).warnings.size() == 1);
  CHECK(parse({"--policy=fifo", "-t", "200"}).opts.priority == 99);
  CHECK(parse({"--policy=fifo", "-t", "2", "-p", "7"}).opts.priority == 7);
  CHECK(parse({"--policy=other", "-t", "2"}).opts.priority == 0);
  r = parse({"-t", "--policy=fifo"});
  REQUIRE(r.ok());
  notes.clear();
  CHECK(check_priospread(r.opts, 4, notes).empty());
  CHECK(r.opts.priority == 5);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "--policy=fifo without -p/--priority: defaulting realtime priority to 5 "
                    "(threads + 1), as cyclictest does");
  // -v before -a CPULIST: cyclictest's early "Using N cpus." line.
  CHECK(parse({"-v", "-a", "0"}).opts.verbose_echo_affinity);
  CHECK_FALSE(parse({"-a", "0", "-v"}).opts.verbose_echo_affinity);
  // The last of -A/--secaligned's values counts; -H then -h keeps the column, as in cyclictest.
  CHECK(parse({"-A", "5", "-A", "7"}).opts.align_offset_us == 7);
  r = parse({"-H", "10", "-h", "20"});
  CHECK((r.opts.histofall && r.opts.histogram_us == 20));
}

TEST_CASE("options: --throttle and --bandwidth set each worker's FIFO budget") {
  using namespace std::chrono_literals;
  const urt::bandwidth_options def = urt::runtime_options{}.bandwidth;
  urt::runtime_options ro = parse({}).opts.runtime_options();
  CHECK(ro.bandwidth.mode == def.mode);  // the runtime's default
  CHECK(ro.bandwidth.runtime == def.runtime);
  CHECK(ro.bandwidth.period == def.period);
  for (const auto& [text, mode] : {std::pair{"off", urt::throttle_mode::off},
                                   std::pair{"deferred", urt::throttle_mode::deferred},
                                   std::pair{"strict", urt::throttle_mode::strict}}) {
    CAPTURE(text);
    const parse_result r = parse({std::string("--throttle=") + text});
    REQUIRE(r.ok());
    CHECK(r.opts.runtime_options().bandwidth.mode == mode);
    CHECK(r.opts.runtime_options().bandwidth.runtime == def.runtime);  // only the mode changes
  }
  parse_result r = parse({"--throttle", "strict", "--bandwidth", "9500/10000"});
  REQUIRE(r.ok());
  ro = r.opts.runtime_options();
  CHECK(ro.bandwidth.mode == urt::throttle_mode::strict);
  CHECK(ro.bandwidth.runtime == 9500us);
  CHECK(ro.bandwidth.period == 10ms);
  r = parse({"--bandwidth=0/1"});  // a deferred budget of nothing: normal work always first
  REQUIRE(r.ok());
  CHECK(r.opts.runtime_options().bandwidth.mode == def.mode);
  CHECK(r.opts.runtime_options().bandwidth.runtime == 0us);
  CHECK(r.opts.runtime_options().bandwidth.period == 1us);
  r = parse({"--bandwidth=3600000000/3600000000", "--throttle=off"});  // the longest period
  REQUIRE(r.ok());
  CHECK(r.opts.runtime_options().bandwidth.period == urt::bandwidth_options::max_period);
  CHECK(r.opts.runtime_options().bandwidth.mode == urt::throttle_mode::off);
  CHECK(parse({"--bandwidth=5000/5000"}).ok());  // runtime == period: FIFO is never held
  // A runtime the parser accepts is one the runtime accepts.
  CHECK_NOTHROW(
      parse({"--throttle=strict", "--bandwidth=1/3600000000"}).opts.runtime_options().validate());
}

TEST_CASE("options: a bad --throttle or --bandwidth is rejected, naming the flag and the value") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--throttle=sometimes"}, "--throttle: 'sometimes' is not off, deferred or strict"},
      {{"--throttle="}, "--throttle: '' is not off, deferred or strict"},
      {{"--throttle"}, "--throttle: missing value"},
      {{"--bandwidth"}, "--bandwidth: missing value"},
      {{"--bandwidth=12000/10000"}, "--bandwidth: '12000/10000' has a runtime above its period"},
      {{"--bandwidth=9500/0"}, "--bandwidth: '9500/0' has a zero period"},
      {{"--bandwidth=0/0"}, "--bandwidth: '0/0' has a zero period"},
      {{"--bandwidth=-1/10000"}, "--bandwidth: '-1/10000' has a negative runtime"},
      {{"--bandwidth=9500/-10000"}, "--bandwidth: '9500/-10000' has a negative period"},
      {{"--bandwidth=9500"},
       "--bandwidth: '9500' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"},
      {{"--bandwidth=9500/"},
       "--bandwidth: '9500/' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"},
      {{"--bandwidth=/10000"},
       "--bandwidth: '/10000' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"},
      {{"--bandwidth=9.5/10"},
       "--bandwidth: '9.5/10' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"},
      {{"--bandwidth=9500us/10ms"},
       "--bandwidth: '9500us/10ms' is not RUNTIME/PERIOD in whole microseconds (e.g. "
       "9500/10000)"},
      {{"--bandwidth=1/2/3"},
       "--bandwidth: '1/2/3' is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)"},
      {{"--bandwidth=1/3600000001"},
       "--bandwidth: '1/3600000001' has a period above the maximum of 3600000000 us"},
      {{"--bandwidth=1/99999999999999999999999"},
       "--bandwidth: '1/99999999999999999999999' has a period above the maximum of 3600000000 "
       "us"},
      {{"--bandwidth=99999999999999999999999/10000"},
       "--bandwidth: '99999999999999999999999/10000' has a runtime above its period"},
      // Order does not matter: the pair is checked once both are known.
      {{"--bandwidth=0/10000", "--throttle=strict"},
       "--bandwidth: '0/10000' has a runtime of 0, which under --throttle strict would never "
       "run a FIFO task"},
      {{"--throttle=strict", "--bandwidth=0/10000"},
       "--bandwidth: '0/10000' has a runtime of 0, which under --throttle strict would never "
       "run a FIFO task"},
  };
  for (const auto& [args, message] : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    CAPTURE(joined);
    CHECK(parse(args).error == message);
  }
  const parse_result r = parse({"--throttle=strict", "--bandwidth=5000/10000"});
  REQUIRE(r.ok());
  CHECK(flag_error(r.opts, "runtime_options.bandwidth.runtime: bad") ==
        "--throttle/--bandwidth: 'strict 5000/10000': runtime_options.bandwidth.runtime: bad");
}

TEST_CASE("options: runtime errors are rewritten to name the flag") {
  const parse_result r = parse({"-a", "0-99999"});
  REQUIRE(r.ok());
  const std::string msg =
      flag_error(r.opts, "runtime_options.cpus: cpulist \"0-99999\" names PU 99999");
  CHECK(msg.find("-a/--affinity") != std::string::npos);
  CHECK(msg.find("0-99999") != std::string::npos);
  CHECK(msg.find("runtime_options.cpus") != std::string::npos);
  const parse_result t = parse({"--topology=synthetic:garbage"});
  REQUIRE(t.ok());
  CHECK(flag_error(t.opts, "runtime_options.topology.synthetic: bad").find("--topology") !=
        std::string::npos);
  CHECK(flag_error(t.opts, "something else") == "something else");
}

// ---------------------------------------------------------------- stats

TEST_CASE("stats: min/act/avg/max, histogram, overflows, as cyclictest counts them") {
  latency_stats s(10, 3);
  CHECK(s.cycles() == 0);
  CHECK(s.min_us() == 0);
  CHECK(s.avg_us() == 0.0);
  for (const std::int64_t ns : {3999, 1000, 999, 12000, 9999, 25000, 15000, 11000}) s.record(ns);
  CHECK(s.cycles() == 8);
  CHECK(s.min_ns() == 999);
  CHECK(s.min_us() == 0);
  CHECK(s.max_ns() == 25000);
  CHECK(s.max_us() == 25);
  CHECK(s.act_us() == 11);
  // cyclictest's avg: the mean of whole microseconds (3+1+0+12+9+25+15+11)/8.
  CHECK(s.avg_us() == doctest::Approx(76.0 / 8));
  CHECK(s.avg_ns() ==
        doctest::Approx((3999.0 + 1000 + 999 + 12000 + 9999 + 25000 + 15000 + 11000) / 8));
  const auto h = s.histogram();
  REQUIRE(h.size() == 10);
  CHECK(h[0] == 1);
  CHECK(h[1] == 1);
  CHECK(h[3] == 1);
  CHECK(h[9] == 1);
  CHECK(s.overflows() == 4);
  // The first three overflowing cycle numbers are kept (cycles 3, 5, 6).
  REQUIRE(s.overflow_cycles().size() == 3);
  CHECK(s.overflow_cycles()[0] == 3);
  CHECK(s.overflow_cycles()[1] == 5);
  CHECK(s.overflow_cycles()[2] == 6);
}

TEST_CASE("stats: percentiles from the full histogram and the overflows' values") {
  // 1000 samples: 500 at 10 us, 490 at 20 us, 9 at 30 us, 1 at 40 us.
  std::vector<std::uint64_t> h(50, 0);
  h[10] = 500;
  h[20] = 490;
  h[30] = 9;
  h[40] = 1;
  const std::span<const overflow_value> none;
  CHECK(percentile_us(h, none, 0.50) == 10);   // rank 500
  CHECK(percentile_us(h, none, 0.501) == 20);  // rank 501
  CHECK(percentile_us(h, none, 0.99) == 20);   // rank 990
  CHECK(percentile_us(h, none, 0.991) == 30);  // rank 991
  CHECK(percentile_us(h, none, 0.999) == 30);  // rank 999
  CHECK(percentile_us(h, none, 1.0) == 40);    // rank 1000: the max
  CHECK(percentile_us(h, none, 0.0) == 10);    // rank clamps to 1
  // 100 samples 0..99 us: nearest rank, no off-by-one from 0.99 * 100.
  std::vector<std::uint64_t> u(100, 1);
  CHECK(percentile_us(u, none, 0.50) == 49);
  CHECK(percentile_us(u, none, 0.99) == 98);
  CHECK(percentile_us(u, none, 0.999) == 99);
  // Ranks beyond the histogram are found among the overflows by value.
  std::vector<std::uint64_t> small(10, 0);
  small[5] = 97;
  const overflow_value over[] = {{.us = 300, .count = 2}, {.us = 1234, .count = 1}};
  CHECK(percentile_us(small, over, 0.97) == 5);
  CHECK(percentile_us(small, over, 0.98) == 300);
  CHECK(percentile_us(small, over, 0.99) == 300);
  CHECK(percentile_us(small, over, 0.999) == 1234);
  // Only a count of overflows: the max, an upper bound.
  CHECK(percentile_us(small, 3, 1234, 0.98) == 1234);
  CHECK(percentile_us(small, 3, 1234, 0.97) == 5);
  // Empty: 0.
  CHECK(percentile_us(std::vector<std::uint64_t>(10, 0), none, 0.5) == 0);
  CHECK(percentile_us(std::vector<std::uint64_t>(10, 0), 0, 0, 0.5) == 0);

  latency_stats s(100);
  for (int i = 0; i < 1000; ++i) s.record(i < 990 ? 7'500 : 500'000);  // 10 overflow at 500 us
  CHECK(s.overflows() == 10);
  CHECK(s.percentile_us(0.50) == 7);
  CHECK(s.percentile_us(0.99) == 7);
  CHECK(s.percentile_us(0.999) == 500);
}

TEST_CASE("stats: percentiles are exact with a small -h, ranks among the overflows included") {
  // A known sample set: 1000 samples, latency k us for k = 1..1000, in a
  // scrambled order, kept by a -h 20 histogram: 981 of them overflow.
  latency_stats s(20, 20);
  for (std::int64_t i = 0; i < 1000; ++i) s.record(((i * 337) % 1000 + 1) * 1000 + 999);
  CHECK(s.cycles() == 1000);
  CHECK(s.histogram().size() == 20);
  CHECK(s.overflows() == 981);  // 20..1000 us
  CHECK(s.max_us() == 1000);
  // Nearest rank of 1..1000: the value is the rank.
  CHECK(s.percentile_us(0.01) == 10);
  CHECK(s.percentile_us(0.50) == 500);
  CHECK(s.percentile_us(0.99) == 990);
  CHECK(s.percentile_us(0.999) == 999);
  CHECK(s.percentile_us(1.0) == 1000);
  CHECK(s.untracked_overflows() == 0);

  // Above the 10 ms of exact 1 us buckets too: values kept in the table.
  latency_stats big(20);
  for (int i = 0; i < 900; ++i) big.record(5'000);         // 5 us
  for (int i = 0; i < 90; ++i) big.record(25'000'000);     // 25 ms
  for (int i = 0; i < 9; ++i) big.record(40'000'000);      // 40 ms
  big.record(2'000'000'000);                               // 2 s
  CHECK(big.overflows() == 100);
  CHECK(big.percentile_us(0.50) == 5);
  CHECK(big.percentile_us(0.90) == 5);
  CHECK(big.percentile_us(0.901) == 25'000);
  CHECK(big.percentile_us(0.99) == 25'000);
  CHECK(big.percentile_us(0.999) == 40'000);
  CHECK(big.percentile_us(1.0) == 2'000'000);
  const std::vector<overflow_value> v = big.overflow_values();
  REQUIRE(v.size() == 3);
  CHECK(v[0].us == 25'000);
  CHECK(v[0].count == 90);
  CHECK(v[2].us == 2'000'000);

  // More distinct values above the exact buckets than the table keeps:
  // the rest are counted and taken as the max (an upper bound).
  latency_stats many(20);
  const auto n = static_cast<std::int64_t>(latency_stats::max_overflow_values) + 10;
  for (std::int64_t i = 0; i < n; ++i) many.record((20'000 + i) * 1000);
  CHECK(many.untracked_overflows() == 10);
  CHECK(many.percentile_us(0.5) == 20'000 + (n + 1) / 2 - 1);
  CHECK(many.percentile_us(1.0) == 20'000 + n - 1);
}

TEST_CASE("stats: -N counts the same samples in ns: values, 1 ns buckets, overflows") {
  // The same samples in both units: the ns figures are the us ones x 1000
  // plus what the us truncate.
  latency_stats us(10, 4);
  latency_stats ns(10, 4, latency_unit::ns);
  for (const std::int64_t v : {3, 9, 999, 1000, 4500, 12000}) {
    us.record(v);
    ns.record(v);
  }
  CHECK(ns.unit() == latency_unit::ns);
  CHECK(us.unit() == latency_unit::us);
  CHECK(ns.min_value() == 3);
  CHECK(us.min_value() == 0);
  CHECK(ns.max_value() == 12000);
  CHECK(us.max_value() == 12);
  CHECK(ns.act_value() == 12000);
  CHECK(us.act_value() == 12);
  CHECK(ns.avg_value() == doctest::Approx((3.0 + 9 + 999 + 1000 + 4500 + 12000) / 6));
  CHECK(us.avg_value() == doctest::Approx((0.0 + 0 + 0 + 1 + 4 + 12) / 6));
  // -h 10 with -N: ten 1 ns buckets (cyclictest's); 999 ns and above overflow.
  const auto h = ns.histogram();
  REQUIRE(h.size() == 10);
  CHECK(h[3] == 1);
  CHECK(h[9] == 1);
  CHECK(ns.overflows() == 4);
  REQUIRE(ns.overflow_cycles().size() == 4);
  CHECK(ns.overflow_cycles()[0] == 2);
  // In us, -h 10 is ten 1 us buckets: only 12 us overflows.
  CHECK(us.histogram()[0] == 3);
  CHECK(us.overflows() == 1);
  // urt's percentiles stay exact, in whole us, in both units.
  CHECK(ns.percentile_us(0.5) == us.percentile_us(0.5));
  CHECK(ns.percentile_us(1.0) == 12);
  CHECK(in_unit(1999, latency_unit::us) == 1);
  CHECK(in_unit(1999, latency_unit::ns) == 1999);
}

// ---------------------------------------------------------------- report

TEST_CASE("report: status and percentile lines in cyclictest's layout") {
  latency_stats s(200);
  for (const std::int64_t ns : {7000, 16000, 107000, 16500}) s.record(ns);
  thread_report t{.index = 0, .tid = 1234, .priority = 80, .interval_us = 1000, .stats = &s};
  CHECK(format_status_line(t) ==
        "T: 0 ( 1234) P:80 I:1000 C:      4 Min:      7 Act:   16 Avg:   36 Max:     107");
  CHECK(format_percentile_line(t) == "T: 0 p50: 16 p99: 107 p99.9: 107");
  // Before the first release: cyclictest's placeholders (tid 0, Min 1000000).
  latency_stats none(200);
  const thread_report fresh{.index = 0, .tid = 0, .priority = 0, .interval_us = 1000,
                            .stats = &none};
  CHECK(format_status_line(fresh) ==
        "T: 0 (    0) P: 0 I:1000 C:      0 Min:1000000 Act:    0 Avg:    0 Max:       0");
}

TEST_CASE("report: histogram in cyclictest's format") {
  latency_stats a(5, 5);
  latency_stats b(5, 5);
  for (const std::int64_t ns : {1000, 1500, 3000, 9000}) a.record(ns);  // 9 us overflows
  for (const std::int64_t ns : {4000, 4999}) b.record(ns);
  const std::vector<thread_report> threads = {{.index = 0, .stats = &a}, {.index = 1, .stats = &b}};
  const std::string text = format_histogram(threads, 5);
  const auto lines = lines_of(text);
  const std::vector<std::string> expected = {
      "# Histogram",
      "000000 000000\t000000",
      "000001 000002\t000000",
      "000002 000000\t000000",
      "000003 000001\t000000",
      "000004 000000\t000002",
      "# Total: 000000003 000000002",
      "# Min Latencies: 00001 00004",
      "# Avg Latencies: 00003 00004",
      "# Max Latencies: 00009 00004",
      "# Histogram Overflows: 00001 00000",
      "# Histogram Overflow at cycle number:",
      "# Thread 0: 00003",
      "# Thread 1:",
  };
  REQUIRE(lines.size() == expected.size() + 1);
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(lines[i] == expected[i]);
  CHECK(lines.back().empty());  // cyclictest ends the histogram with an empty line

  // One thread: no tab; more overflows than kept cycle numbers: "# N others".
  latency_stats c(2, 1);
  for (const std::int64_t ns : {5000, 6000, 7000, 1000}) c.record(ns);
  const auto one = lines_of(format_histogram({{.index = 0, .stats = &c}}, 2));
  CHECK(one[1] == "000000 000000");
  CHECK(one[2] == "000001 000001");
  CHECK(one[3] == "# Total: 000000001");
  CHECK(one[9] == "# Thread 0: 00000 # 00002 others");
}

TEST_CASE("report: -N's status line and histogram, in ns, in cyclictest's layout") {
  latency_stats s(200, 200, latency_unit::ns);
  for (const std::int64_t ns : {7000, 16123, 107456, 16500}) s.record(ns);
  const thread_report t{.index = 0, .tid = 1234, .priority = 80, .interval_us = 1000, .stats = &s};
  // cyclictest -N: "Act:%8ld Avg:%8ld".
  CHECK(format_status_line(t) ==
        "T: 0 ( 1234) P:80 I:1000 C:      4 Min:   7000 Act:   16500 Avg:   36769 Max:  107456");
  latency_stats none(200, 0, latency_unit::ns);
  const thread_report fresh{.index = 1, .interval_us = 1500, .stats = &none};
  CHECK(format_status_line(fresh) ==
        "T: 1 (    0) P: 0 I:1500 C:      0 Min:1000000 Act:       0 Avg:       0 Max:       0");
  // The histogram's buckets are 1 ns: -h 3 counts 0, 1 and 2 ns.
  latency_stats small(3, 3, latency_unit::ns);
  for (const std::int64_t ns : {1, 2, 2, 900}) small.record(ns);
  const auto lines = lines_of(format_histogram({{.index = 0, .stats = &small}}, 3));
  const std::vector<std::string> expected = {
      "# Histogram",          "000000 000000",         "000001 000001",
      "000002 000002",        "# Total: 000000003",    "# Min Latencies: 00001",
      "# Avg Latencies: 00226", "# Max Latencies: 00900", "# Histogram Overflows: 00001",
      "# Histogram Overflow at cycle number:",          "# Thread 0: 00003",
  };
  REQUIRE(lines.size() == expected.size() + 1);
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(lines[i] == expected[i]);
}

TEST_CASE("report: -H's summary column over all threads, as cyclictest prints it") {
  latency_stats a(3, 3);
  latency_stats b(3, 3);
  for (const std::int64_t ns : {1000, 2000, 2500, 9000}) a.record(ns);  // 9 us overflows
  for (const std::int64_t ns : {0, 2000, 4000, 5000}) b.record(ns);     // 4, 5 us overflow
  const std::vector<thread_report> threads = {{.index = 0, .stats = &a}, {.index = 1, .stats = &b}};
  const std::vector<std::string> expected = {
      "# Histogram",
      "000000 000000\t000001\t000001",
      "000001 000001\t000000\t000001",
      "000002 000002\t000001\t000003",
      "# Total: 000000003 000000002 000000005",
      "# Min Latencies: 00001 00000",
      "# Avg Latencies: 00003 00002",
      "# Max Latencies: 00009 00005 00009",
      "# Histogram Overflows: 00001 00002 00003",
      "# Histogram Overflow at cycle number:",
      "# Thread 0: 00003",
      "# Thread 1: 00002 00003",
  };
  const auto lines = lines_of(format_histogram(threads, 3, true));
  REQUIRE(lines.size() == expected.size() + 1);
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(lines[i] == expected[i]);
  CHECK(lines.back().empty());
  // One thread: cyclictest prints no summary column ("histofall && nthreads > 1").
  CHECK(format_histogram({threads[0]}, 3, true) == format_histogram({threads[0]}, 3, false));
  // Without -H, none.
  CHECK(lines_of(format_histogram(threads, 3, false))[1] == "000000 000000\t000001");
}

TEST_CASE("report: -v's samples, --spike's list and -b's lines, as cyclictest prints them") {
  CHECK(format_verbose_line(0, 0, 82) == "       0:       0:      82\n");
  CHECK(format_verbose_line(12, 123456789, 1234567890) == "      12:123456789:1234567890\n");
  CHECK(format_spikes({}, 0).empty());
  CHECK(format_spikes({}, 5).empty());  // none kept (--spike-nodes=0): nothing, as cyclictest
  CHECK(format_spikes({{.thread = 0, .value = 75, .time_us = 833381849},
                       {.thread = 11, .value = 123456789, .time_us = 1}},
                      38) ==
        "\nT: 0 Spike:      75: TS:    833381849\nT:11 Spike:123456789: TS:            1\n"
        "spikes = 38\n\n");
  latency_stats s(10);
  const std::vector<thread_report> threads = {{.index = 0, .tid = 1115, .stats = &s},
                                              {.index = 1, .tid = 42, .stats = &s}};
  CHECK(format_break(threads, 0, 0, false) == "# Thread Ids: 01115 00042\n");
  CHECK(format_break(threads, 1115, 94, true) ==
        "# Thread Ids: 01115 00042\n# Break thread: 1115\n# Break value: 94\n");
}

TEST_CASE("report: the JSON in ns with -N (resolution_in_ns 1, as cyclictest writes it)") {
  latency_stats a(100000, 0, latency_unit::ns);
  for (const std::int64_t ns : {7000, 16123, 16123, 250000}) a.record(ns);
  json_header h;
  h.histogram = true;
  const std::string text =
      format_json(h, {{.index = 0, .tid = 7, .first_release_ns = 123456789, .stats = &a}});
  const json j = parse_json(text);
  CHECK(j["resolution_in_ns"].num() == 1);
  const json& t = j["thread"]["0"];
  CHECK(t["min"].num() == 7000);
  CHECK(t["max"].num() == 250000);
  CHECK(t["avg"].num() == doctest::Approx((7000.0 + 16123 * 2 + 250000) / 4).epsilon(1e-6));
  CHECK(t["histogram"]["16123"].num() == 2);  // 1 ns buckets
  CHECK(t["histogram"]["7000"].num() == 1);
  CHECK(t["histogram"].obj().size() == 2);  // 250000 ns is above -h 100000
  const json& u = j["urt"]["threads"]["0"];
  CHECK(u["min_ns"].num() == 7000);
  CHECK(u["p50"].num() == 16);  // urt's percentiles stay in us
  CHECK(u["overflows"].num() == 1);
  CHECK(u["first_release_ns"].num() == 123456789);
  // Without -N: 0 and us.
  latency_stats b(100);
  b.record(7000);
  const json k = parse_json(format_json(h, {{.index = 0, .stats = &b}}));
  CHECK(k["resolution_in_ns"].num() == 0);
  CHECK(k["thread"]["0"]["min"].num() == 7);
}

TEST_CASE("report: JSON has cyclictest's keys, urt's only under \"urt\", and its counts add up") {
  latency_stats a(100);
  latency_stats b(100);
  for (int i = 0; i < 50; ++i) a.record(1000 * (i % 7) + 300);
  for (int i = 0; i < 30; ++i) b.record(i == 29 ? 250'000 : 12'000);  // one overflow
  const std::vector<thread_report> threads = {{.index = 0,
                                               .tid = 11,
                                               .priority = 80,
                                               .interval_us = 1000,
                                               .cpu = 0,
                                               .node = 0,
                                               .stats = &a},
                                              {.index = 1,
                                               .tid = 12,
                                               .priority = 80,
                                               .interval_us = 1000,
                                               .cpu = 1,
                                               .node = 0,
                                               .stats = &b}};
  json_header h;
  h.cmdline = "urt-cyclictest -t 2 --json=\"x\"";
  h.version = "0.1.0";
  h.start_time = rfc2822_now();
  h.end_time = rfc2822_now();
  h.histogram = true;
  h.urt_members = "    \"policy\": \"other\"";
  const std::string text = format_json(h, threads);
  const json j = parse_json(text);
  CHECK(j.obj().size() == 11);
  for (const char* key :
       {"file_version", "cmdline:", "rt_test_version:", "start_time", "end_time", "return_code",
        "sysinfo", "num_threads", "resolution_in_ns", "thread", "urt"}) {
    CAPTURE(key);
    CHECK(j.has(key));
  }
  CHECK(j["file_version"].num() == 1);
  CHECK(j["cmdline:"].str() == h.cmdline);
  CHECK(j["num_threads"].num() == 2);
  CHECK(j["urt"]["policy"].str() == "other");
  for (const char* key : {"sysname", "nodename", "release", "version", "machine", "realtime"}) {
    CHECK(j["sysinfo"].has(key));
  }
  const std::vector<const latency_stats*> stats = {&a, &b};
  for (std::size_t i = 0; i < 2; ++i) {
    const json& t = j["thread"][std::to_string(i)];
    CHECK(t.obj().size() == 7);  // cyclictest's keys, nothing more
    for (const char* key : {"histogram", "cycles", "min", "max", "avg", "cpu", "node"}) {
      CAPTURE(key);
      CHECK(t.has(key));
    }
    const json& u = j["urt"]["threads"][std::to_string(i)];
    CHECK(u.obj().size() == 9);
    for (const char* key : {"p50", "p99", "p99_9", "overflows", "min_ns", "max_ns", "avg_ns", "tid",
                            "first_release_ns"}) {
      CAPTURE(key);
      CHECK(u.has(key));
    }
    double sum = 0;
    for (const auto& [bucket, count] : t["histogram"].obj()) {
      CHECK(std::stoul(bucket) < 100);
      CHECK(count.num() > 0);  // cyclictest lists only non-empty buckets
      sum += count.num();
    }
    CHECK(sum + u["overflows"].num() == t["cycles"].num());
    CHECK(t["cycles"].num() == static_cast<double>(stats[i]->cycles()));
    CHECK(t["max"].num() == static_cast<double>(stats[i]->max_us()));
    CHECK(u["p99_9"].num() == static_cast<double>(stats[i]->percentile_us(0.999)));
  }
  CHECK(j["urt"]["threads"]["1"]["overflows"].num() == 1);
  CHECK(j["urt"]["threads"]["1"]["tid"].num() == 12);
  CHECK(j["thread"]["1"]["max"].num() == 250);

  // Without -h cyclictest writes an empty histogram, "{      }".
  h.histogram = false;
  const std::string plain = format_json(h, threads);
  CHECK(plain.find("\"histogram\": {      },\n") != std::string::npos);
  CHECK(parse_json(plain)["thread"]["0"]["histogram"].obj().empty());
}

// ---------------------------------------------------------------- the binary

TEST_CASE("binary: a bad flag exits 2 with the flag on stderr, --help exits 0") {
  temp_file err("err");
  CHECK(run_binary("--migration=push", "/dev/null", err.path) == 2);
  const std::string text = slurp(err.path);
  CHECK(text.find("--migration=push") != std::string::npos);
  CHECK(text.find("Usage:") != std::string::npos);
  CHECK(run_binary("-p 100") == 2);
  CHECK(run_binary("-i abc") == 2);
  CHECK(run_binary("--load=3") == 2);
  CHECK(run_binary("-D 5x") == 2);
  temp_file out("help");
  CHECK(run_binary("--help", out.path) == 0);
  CHECK(slurp(out.path).find("--interval") != std::string::npos);
}

TEST_CASE("binary: the runtime's own errors (cpulist, topology) exit 2 naming the flag") {
  temp_file err("err");
  CHECK(run_binary("-a 0-99999 -l 1 -q --policy=other", "/dev/null", err.path) == 2);
  std::string text = slurp(err.path);
  CAPTURE(text);
  CHECK(text.find("-a/--affinity") != std::string::npos);
  CHECK(text.find("0-99999") != std::string::npos);
  CHECK(text.find("runtime_options.cpus") != std::string::npos);
  CHECK(run_binary("'--topology=synthetic:no such thing' -l 1 -q", "/dev/null", err.path) == 2);
  text = slurp(err.path);
  CHECK(text.find("--topology") != std::string::npos);
}

TEST_CASE("binary: a short real run records -l cycles in thread 0, and stops the others with it") {
  temp_file json_out("json");
  temp_file out("out");
  REQUIRE(run_binary("-t 2 -i 1000 -l 100 -q --policy=other --json=" + json_out.path, out.path) ==
          0);
  const json j = parse_json(slurp(json_out.path));
  REQUIRE(j["num_threads"].num() == 2);
  // Thread 1 runs at 1500 us: as in cyclictest, the run ends when one
  // thread (thread 0, unless stalls made it skip releases) has done its
  // loops, with the other short of them.
  CHECK(std::max(j["thread"]["0"]["cycles"].num(), j["thread"]["1"]["cycles"].num()) == 100);
  CHECK(j["thread"]["0"]["cycles"].num() <= 100);
  CHECK(j["thread"]["1"]["cycles"].num() <= 100);
  for (const char* t : {"0", "1"}) {
    CAPTURE(t);
    const json& th = j["thread"][t];
    const json& u = j["urt"]["threads"][t];
    CHECK(th["histogram"].obj().empty());  // no -h: as cyclictest
    CHECK(th["cpu"].num() >= 0);
    CHECK(th["min"].num() <= u["p50"].num());
    CHECK(u["p50"].num() <= u["p99"].num());
    CHECK(u["p99"].num() <= u["p99_9"].num());
    CHECK(u["p99_9"].num() <= th["max"].num());
    CHECK(u["tid"].num() > 0);
  }
  CHECK(j["urt"]["policy"].str() == "other");
  CHECK(j["urt"]["loops"].num() == 100);
  CHECK(j["urt"]["overrun"].str() == "skip");
  CHECK(j["urt"]["timer_wake"].str() == "adaptive");
  CHECK(j["urt"]["timer_advance_ns"].num() <= 100000);  // the adaptive advance's bound
  CHECK(j["urt"]["timer_spin_total_ns"].num() >= 0);
  CHECK(j["urt"]["idle_spin_policy"].str() == "adaptive");
  CHECK(j["urt"]["idle_spin_now_ns"].num() <= j["urt"]["idle_spin_ns"].num());
  // One series per worker, also without -a.
  if (j["urt"]["workers"].num() >= 2)
    CHECK(j["thread"]["0"]["cpu"].num() != j["thread"]["1"]["cpu"].num());
  // The summary: cyclictest's status line per thread, none of urt's lines.
  std::string text = slurp(out.path);
  CHECK(text.find("T: 0 (") != std::string::npos);
  CHECK(text.find("T: 1 (") != std::string::npos);
  CHECK(text.find("T: 0 (") < text.find("C:    100"));
  CHECK(text.find("p50:") == std::string::npos);
  CHECK(text.find("# timer:") == std::string::npos);
  CHECK(text.find("# bandwidth:") == std::string::npos);
  // --urt-summary: then a percentile line per thread and what spinning cost.
  REQUIRE(run_binary("-t 2 -i 1000 -l 20 -q --policy=other --urt-summary", out.path) == 0);
  text = slurp(out.path);
  CAPTURE(text);
  CHECK(text.find("T: 1 (") != std::string::npos);
  CHECK(text.find("T: 1 p50:") != std::string::npos);
  CHECK(text.find("# timer: adaptive, advance ") != std::string::npos);
  CHECK(text.find("# bandwidth: ") != std::string::npos);
}

TEST_CASE("binary: the live frames name the policy as cyclictest does") {
  temp_file out("out");
  // -p 0 runs SCHED_OTHER: cyclictest's "other/other" (its force_sched_other).
  REQUIRE(run_binary("-t 1 -i 1000 -l 5 --policy=other", out.path) == 0);
  const std::string text = slurp(out.path);
  CAPTURE(text);
  CHECK(text.find("policy: other/other: loadavg: ") != std::string::npos);
  CHECK(text.find("p50:") == std::string::npos);
}

TEST_CASE("binary: --throttle and --bandwidth reach the runtime, and the JSON has the budget") {
  // One worker, kept busy by a FIFO load (priority 10) below the measured
  // series (priority 20): FIFO work only, no normal work.
  const std::string common =
      "'--topology=synthetic:core:1 pu:1' -t 1 -i 1000 -q --policy=other -p 20 --load=1:10 "
      "--urt-summary ";
  const auto budget_of = [&](const std::string& args, const std::string& out_path) {
    temp_file json_out("json");
    REQUIRE(run_binary(common + args + " --json=" + json_out.path, out_path) == 0);
    const json j = parse_json(slurp(json_out.path));
    CHECK(j["urt"]["load"]["runs"].num() > 0);
    return j;
  };
  temp_file out("out");
  SUBCASE("strict holds the busy worker's FIFO work back every period") {
    const json j = budget_of("-l 100 --throttle strict --bandwidth 5000/10000", out.path);
    CHECK(j["thread"]["0"]["cycles"].num() == 100);  // the series ran on, between the holds
    const json& b = j["urt"]["bandwidth"];
    CHECK(b["mode"].str() == "strict");
    CHECK(b["runtime_us"].num() == 5000);
    CHECK(b["period_us"].num() == 10000);
    CHECK(b["fifo_ns"].num() > 0);
    CHECK(b["normal_ns"].num() == 0);  // there is no normal work
    CHECK(b["idle_ns"].num() > 0);     // held with nothing else to run: the worker idles
    CHECK(b["throttle_events"].num() > 0);
    CHECK(b["throttled_ns"].num() > 0);
    CHECK(b["server_slices"].num() == 0);
    CHECK(b.has("overrun_ns"));
    CHECK(b.has("overrun_events"));
    const std::string text = slurp(out.path);
    CAPTURE(text);
    CHECK(text.find("# bandwidth: strict 5000/10000 us: FIFO ") != std::string::npos);
  }
  SUBCASE("deferred never holds FIFO work back when no normal work waits") {
    const json j = budget_of("-l 50 --throttle=deferred --bandwidth=5000/10000", out.path);
    const json& b = j["urt"]["bandwidth"];
    CHECK(b["mode"].str() == "deferred");
    CHECK(b["fifo_ns"].num() > 0);
    CHECK(b["throttle_events"].num() == 0);
    CHECK(b["throttled_ns"].num() == 0);
  }
  SUBCASE("off accounts nothing") {
    const json j = budget_of("-l 20 --throttle=off", out.path);
    const json& b = j["urt"]["bandwidth"];
    CHECK(b["mode"].str() == "off");
    CHECK(b["runtime_us"].num() == 9500);  // the runtime's default, unused
    CHECK(b["period_us"].num() == 10000);
    for (const char* key : {"fifo_ns", "normal_ns", "idle_ns", "throttle_events", "throttled_ns",
                            "server_slices", "overrun_ns", "overrun_events"}) {
      CAPTURE(key);
      CHECK(b[key].num() == 0);
    }
    CHECK(slurp(out.path).find("# bandwidth: off\n") != std::string::npos);
  }
}

TEST_CASE("binary: a bad --throttle or --bandwidth exits 2 naming the flag and the value") {
  temp_file err("err");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--bandwidth=12000/10000", "--bandwidth: '12000/10000' has a runtime above its period"},
           {"--bandwidth 9500/0", "--bandwidth: '9500/0' has a zero period"},
           {"--throttle=sometimes", "--throttle: 'sometimes' is not off, deferred or strict"},
           {"--throttle strict --bandwidth 0/10000",
            "--bandwidth: '0/10000' has a runtime of 0, which under --throttle strict"}}) {
    CAPTURE(args);
    CHECK(run_binary(args + " -l 1 -q --policy=other", "/dev/null", err.path) == 2);
    CHECK(slurp(err.path).find("urt-cyclictest: " + message) != std::string::npos);
  }
}

TEST_CASE("binary: --cid puts the series in a group that takes an ID every release") {
  // 4 synthetic workers, 4 series (one per worker): each release counts in
  // a per_cid; the counts add up to every release, and no ID reaches 4.
  for (const char* mode : {"batched_scan", "ownership"}) {
    CAPTURE(mode);
    temp_file out("out");
    temp_file json_out("json");
    REQUIRE(run_binary(std::string("'--topology=synthetic:core:4 pu:1' -t 4 -i 500 -l 200 -q "
                                   "--policy=other --urt-summary --cid=") +
                           mode + " --json=" + json_out.path,
                       out.path) == 0);
    const json j = parse_json(slurp(json_out.path));
    const json& c = j["urt"]["cid"];
    CHECK(c["mode"].str() == mode);
    // Every release counted (the run ends when one thread has its 200).
    double cycles = 0;
    double most = 0;
    for (const char* t : {"0", "1", "2", "3"}) {
      cycles += j["thread"][t]["cycles"].num();
      most = std::max(most, j["thread"][t]["cycles"].num());
    }
    CHECK(most == 200);
    CHECK(c["releases_counted"].num() == cycles);
    CHECK(c["allocated"].num() >= 1);
    CHECK(c["ids_used"].num() >= 1);
    CHECK(c["ids_used"].num() <= 4);
    CHECK(c["highest"].num() < 4);
    CHECK(c.has("step_ns_histogram"));
    if (std::string(mode) == "ownership") CHECK(c["steps"].num() == 0);
    CHECK(slurp(out.path).find(std::string("# cid: ") + mode + ": ") != std::string::npos);
  }
  // Without --cid: no group, and the JSON says so.
  temp_file json_out("json");
  REQUIRE(run_binary("-t 1 -i 1000 -l 5 -q --policy=other --json=" + json_out.path, "/dev/null") ==
          0);
  CHECK(slurp(json_out.path).find("\"cid\": null") != std::string::npos);
  temp_file err("err");
  CHECK(run_binary("--cid=sometimes -l 1 -q --policy=other", "/dev/null", err.path) == 2);
  CHECK(slurp(err.path).find("urt-cyclictest: --cid: 'sometimes' is not batched_scan or ownership") !=
        std::string::npos);
}

TEST_CASE("binary: histogram on stdout and to --histfile, on a synthetic topology, -t per worker") {
  temp_file hist("hist");
  temp_file json_out("json");
  REQUIRE(run_binary("'--topology=synthetic:core:3 pu:1' -t -a -i 500 -l 50 -q -h 40 --histfile=" +
                     hist.path + " --json=" + json_out.path) == 0);
  const auto lines = lines_of(slurp(hist.path));
  REQUIRE(lines.size() >= 41);
  CHECK(lines[0] == "# Histogram");
  CHECK(lines[1].size() == std::string("000000 000000\t000000\t000000").size());
  CHECK(lines[1].starts_with("000000 "));
  CHECK(lines[40].starts_with("000039 "));
  CHECK(lines[41].starts_with("# Total:"));
  const json j = parse_json(slurp(json_out.path));
  CHECK(j["num_threads"].num() == 3);  // -t without a number: one per worker
  // -h: all at one interval. The run ends once one of them has its 50; the
  // others take the release they wait for (their 50th unless they lag).
  double most = 0;
  for (const char* t : {"0", "1", "2"}) {
    CHECK(j["thread"][t]["cycles"].num() <= 50);
    most = std::max(most, j["thread"][t]["cycles"].num());
    CHECK(j["thread"][t]["cpu"].num() == std::stod(t));  // -a: thread n on worker n
  }
  CHECK(most == 50);
  // Totals in the footer + overflows = cycles.
  std::stringstream total(lines[41].substr(8));
  std::stringstream over(lines[45].substr(std::string("# Histogram Overflows:").size()));
  for (const char* t : {"0", "1", "2"}) {
    unsigned long in_range = 0, overflows = 0;
    total >> in_range;
    over >> overflows;
    CHECK(static_cast<double>(in_range + overflows) == j["thread"][t]["cycles"].num());
  }

  temp_file out("out");
  REQUIRE(run_binary("-t 1 -i 500 -l 20 -q -h 10 --policy=other", out.path) == 0);
  const std::string text = slurp(out.path);
  CHECK(text.find("T:") == std::string::npos);  // -q -h: cyclictest prints no status lines
  CHECK(j["thread"]["0"]["histogram"].obj().size() <= 40);
  CHECK(text.find("# Histogram\n000000 ") != std::string::npos);
  CHECK(text.find("\n000009 ") != std::string::npos);
  CHECK(text.find("\n000010 ") == std::string::npos);
  CHECK(text.find("# Histogram Overflows:") != std::string::npos);
}

TEST_CASE("binary: -S runs -t -a, one series per worker, each on its own worker, at one priority") {
  temp_file json_out("json");
  temp_file err("err");
  REQUIRE(run_binary("'--topology=synthetic:core:3 pu:1' -S -t 2 -i 500 -l 20 -q --json=" +
                         json_out.path,
                     "/dev/null", err.path) == 0);
  const json j = parse_json(slurp(json_out.path));
  CHECK(j["num_threads"].num() == 3);  // one per worker: the -t 2 after -S is ignored
  double most = 0;  // the run ends when one thread (thread 0, unless it skipped) has its loops
  for (const char* t : {"0", "1", "2"}) {
    CHECK(j["thread"][t]["cycles"].num() <= 20);
    most = std::max(most, j["thread"][t]["cycles"].num());
    CHECK(j["thread"][t]["cpu"].num() == std::stod(t));
  }
  CHECK(most == 20);
  CHECK(slurp(err.path).find("-t/--threads is ignored after -S/--smp") != std::string::npos);
}

TEST_CASE("binary: SIGINT ends an endless run cleanly and the summary and JSON are written") {
  temp_file json_out("json");
  temp_file out("out");
  // timeout --preserve-status: the exit status is urt-cyclictest's own.
  const std::string cmd = std::string("timeout --preserve-status -s INT 1 '") +
                          URT_CYCLICTEST_PATH +
                          "' -t 1 -i 1000 -q --policy=other --load=1:0 --urt-summary " +
                          "--json=" + json_out.path + " >" + out.path + " 2>/dev/null";
  const int st = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  const json j = parse_json(slurp(json_out.path));
  CHECK(j["num_threads"].num() == 1);
  CHECK(j["urt"]["load"]["tasks_per_worker"].num() == 1);
  CHECK(slurp(out.path).find("T: 0 p50:") != std::string::npos);
}

TEST_CASE("binary: --json=- comes before the -q status lines and the histogram, as cyclictest") {
  for (const char* args : {"-q -l 3 -i 200 --policy=other --json=-",
                           "-q -l 3 -i 200 -h 5 --policy=other --json=-"}) {
    CAPTURE(args);
    temp_file out("out");
    CHECK(run_binary(args, out.path) == 0);
    const std::string text = slurp(out.path);
    const std::size_t doc = text.find("\n{\n");
    const std::size_t end = text.find("\n}\n");
    const std::size_t after = text.find(std::string(args).find("-h") == std::string::npos
                                            ? "T: 0 "
                                            : "# Histogram\n");
    REQUIRE(doc != std::string::npos);
    REQUIRE(end != std::string::npos);
    REQUIRE(after != std::string::npos);
    CHECK(doc < end);
    CHECK(end < after);  // cyclictest writes the document as soon as the run ends
  }
}

TEST_CASE("binary: /dev/cpu_dma_latency is held at --latency while running, not with --laptop") {
  SUBCASE("--laptop: not touched, with cyclictest's warning") {
    temp_file out("out");
    temp_file err("err");
    CHECK(run_binary("--laptop -q -l 3 -i 200 --policy=other --json=-", out.path, err.path) == 0);
    const std::string text = slurp(out.path);
    CHECK(text.find("/dev/cpu_dma_latency set to") == std::string::npos);
    CHECK(slurp(err.path).find("WARN: not setting cpu_dma_latency to save battery power\n") !=
          std::string::npos);
    CHECK(text.find("\"cpu_dma_latency_us\": null") != std::string::npos);
  }
  SUBCASE("--default-system: not touched, with cyclictest's own warning for it") {
    temp_file out("out");
    temp_file err("err");
    CHECK(run_binary("--default-system -q -l 3 -i 200 --policy=other", out.path, err.path) == 0);
    CHECK(slurp(out.path).find("/dev/cpu_dma_latency set to") == std::string::npos);
    CHECK(slurp(err.path).find("WARN: not setting cpu_dma_latency from cyclictest\n") !=
          std::string::npos);
  }
  SUBCASE("a CPU the runtime refuses: exit 2 before anything is set or said on stdout") {
    temp_file out("out");
    temp_file err("err");
    CHECK(run_binary("-a 1023 -q -l 3 -i 200", out.path, err.path) == 2);
    CHECK(slurp(out.path).empty());
    CHECK(slurp(err.path).find("-a/--affinity: '1023'") != std::string::npos);
  }
  SUBCASE("--latency=7: the file is open for the whole run, the QoS limit at most 7 us") {
    if (!std::filesystem::exists("/dev/cpu_dma_latency")) {
      MESSAGE("skipped: /dev/cpu_dma_latency does not exist here");
      return;
    }
    if (geteuid() != 0) {
      MESSAGE("skipped: opening /dev/cpu_dma_latency needs root");
      return;
    }
    temp_file out("out");
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const int fd = ::open(out.path.c_str(), O_WRONLY | O_TRUNC);
      const int null = ::open("/dev/null", O_WRONLY);
      if (fd < 0 || null < 0 || dup2(fd, 1) < 0 || dup2(null, 2) < 0) _exit(127);
      execl(URT_CYCLICTEST_PATH, URT_CYCLICTEST_PATH, "-q", "-i", "1000", "--policy=other",
            "--latency=7", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Endless run: look for the open file among its descriptors (a bounded
    // wait for the process to start, not a timing assertion).
    const auto holds_pm_qos = [pid] {
      std::error_code ec;
      const std::filesystem::path fds = "/proc/" + std::to_string(pid) + "/fd";
      for (const auto& e : std::filesystem::directory_iterator(fds, ec)) {
        std::error_code link_ec;
        if (std::filesystem::read_symlink(e.path(), link_ec) == "/dev/cpu_dma_latency") return true;
      }
      return false;
    };
    bool held = false;
    for (int i = 0; i < 1000 && !held; ++i) {
      held = holds_pm_qos();
      if (!held) usleep(10000);
    }
    CHECK(held);
    // The kernel's aggregate CPU latency limit honours the request (other
    // holders may ask for less).
    std::int32_t limit = -1;
    if (const int q = ::open("/dev/cpu_dma_latency", O_RDONLY); q >= 0) {
      CHECK(::read(q, &limit, sizeof limit) == static_cast<ssize_t>(sizeof limit));
      ::close(q);
    }
    CHECK(limit >= 0);
    CHECK(limit <= 7);
    CHECK(holds_pm_qos());  // still held after some time running
    REQUIRE(kill(pid, SIGINT) == 0);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(slurp(out.path).find("# /dev/cpu_dma_latency set to 7us\n") != std::string::npos);
  }
}

// ------------------------------------------- cyclictest's -N, -b, -l, -H, -v, ...

namespace {

/// The figures of one status line ("T: 0 (tid) P: I: C: Min: Act: Avg: Max:").
struct status_line {
  int index = -1, tid = 0, priority = 0;
  unsigned long long interval = 0, cycles = 0;
  long min = 0, act = 0, avg = 0, max = 0;
};

/// The status line of thread `index` in `text` (the last one), index -1 if none.
status_line status_of(const std::string& text, int index) {
  status_line found;
  for (const std::string& line : lines_of(text)) {
    status_line s;
    if (std::sscanf(line.c_str(), "T:%d (%d) P:%d I:%llu C:%llu Min:%ld Act:%ld Avg:%ld Max:%ld",
                    &s.index, &s.tid, &s.priority, &s.interval, &s.cycles, &s.min, &s.act, &s.avg,
                    &s.max) == 9 &&
        s.index == index) {
      found = s;
    }
  }
  return found;
}

/// The -v sample lines of `text`: (thread, cycle, value), in order.
struct sample {
  unsigned thread = 0;
  unsigned long long cycle = 0;
  long long value = 0;
};
std::vector<sample> samples_of(const std::string& text) {
  std::vector<sample> out;
  for (const std::string& line : lines_of(text)) {
    sample s;
    char rest = 0;
    if (line.size() >= 26 && line[8] == ':' &&
        std::sscanf(line.c_str(), "%u:%llu:%lld%c", &s.thread, &s.cycle, &s.value, &rest) == 3) {
      out.push_back(s);
    }
  }
  return out;
}

/// Starts the binary with `args` in the background, stdout to `out_path`;
/// its pid.
pid_t start_binary(const std::vector<std::string>& args, const std::string& out_path) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(out_path.c_str(), O_WRONLY | O_TRUNC);
    const int null = ::open("/dev/null", O_WRONLY);
    if (fd < 0 || null < 0 || dup2(fd, 1) < 0 || dup2(null, 2) < 0) _exit(127);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(URT_CYCLICTEST_PATH));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(URT_CYCLICTEST_PATH, argv.data());
    _exit(127);
  }
  return pid;
}

/// Each thread's signal state of process `pid` (the Sig* and ShdPnd lines
/// of /proc/PID/task/TID/status), for a failure message.
std::string signal_state(pid_t pid) {
  std::string out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    out += "thread " + t.path().filename().string() + ":";
    for (const std::string& line : lines_of(slurp((t.path() / "status").string()))) {
      if (line.starts_with("Sig") || line.starts_with("ShdPnd")) out += " " + line;
    }
    out += "\n";
  }
  return out;
}

/// Ends a run started by start_binary() with SIGINT; its exit status. A
/// run that has not exited 30 s after the signal is killed and reported
/// with its threads' signal state, rather than hanging the test.
int interrupt(pid_t pid) {
  REQUIRE(kill(pid, SIGINT) == 0);
  int st = 0;
  for (int i = 0; i < 3000; ++i) {
    const pid_t done = waitpid(pid, &st, WNOHANG);
    REQUIRE(done >= 0);
    if (done == pid) {
      REQUIRE(WIFEXITED(st));
      return WEXITSTATUS(st);
    }
    usleep(10000);
  }
  const std::string state = signal_state(pid);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  FAIL("urt-cyclictest did not exit 30 s after SIGINT; its threads' signal state:\n" << state);
  return -1;
}

/// Polls `done` every 10 ms, at most 2000 times (a bounded wait for a
/// process to get somewhere, not a timing assertion); its last answer.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    usleep(10000);
  }
  return done();
}

/// The Cpus_allowed_list of thread `tid` of process `pid`.
std::string cpus_allowed(pid_t pid, pid_t tid) {
  for (const std::string& line :
       lines_of(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status"))) {
    if (line.starts_with("Cpus_allowed_list:")) {
      const std::size_t at = line.find_first_not_of(" \t", 18);
      return at == std::string::npos ? std::string() : line.substr(at);
    }
  }
  return {};
}

}  // namespace

TEST_CASE("binary: -N reports every latency in ns: status lines, JSON, histogram") {
  temp_file json_out("json");
  temp_file out("out");
  temp_file hist("hist");
  REQUIRE(run_binary("-t 2 -i 1000 -l 50 -q -N --policy=other -h 100000 --histfile=" + hist.path +
                         " --json=" + json_out.path,
                     out.path) == 0);
  json j = parse_json(slurp(json_out.path));
  CHECK(j["resolution_in_ns"].num() == 1);  // cyclictest's -N flag
  for (const char* t : {"0", "1"}) {
    CAPTURE(t);
    const json& th = j["thread"][t];
    const json& u = j["urt"]["threads"][t];
    // cyclictest's figures are urt's exact ns ones.
    CHECK(th["min"].num() == u["min_ns"].num());
    CHECK(th["max"].num() == u["max_ns"].num());
    CHECK(std::abs(th["avg"].num() - u["avg_ns"].num()) <= 0.06);  // "%.2f" and "%.1f"
    // urt's percentiles stay in whole us: 1000 times less.
    CHECK(std::floor(th["min"].num() / 1000) <= u["p50"].num());
    CHECK(u["p99_9"].num() <= std::floor(th["max"].num() / 1000));
    // The histogram: 1 ns buckets below -h 100000 (100 us), the rest overflows.
    double in_range = 0;
    for (const auto& [bucket, count] : th["histogram"].obj()) {
      const double b = std::stod(bucket);
      CHECK(b < 100000);
      CHECK(b >= th["min"].num());
      CHECK(b <= th["max"].num());
      in_range += count.num();
    }
    CHECK(in_range + u["overflows"].num() == th["cycles"].num());
  }
  // The histogram file: its footer in ns too.
  const auto lines = lines_of(slurp(hist.path));
  REQUIRE(lines.size() > 100004);
  CHECK(lines[100001].starts_with("# Total:"));
  long min0 = 0, min1 = 0, max0 = 0, max1 = 0;
  REQUIRE(std::sscanf(lines[100002].c_str(), "# Min Latencies: %ld %ld", &min0, &min1) == 2);
  REQUIRE(std::sscanf(lines[100004].c_str(), "# Max Latencies: %ld %ld", &max0, &max1) == 2);
  CHECK(static_cast<double>(min0) == j["thread"]["0"]["min"].num());
  CHECK(static_cast<double>(max1) == j["thread"]["1"]["max"].num());

  // -q without -h: the status lines (-N: "Act:%8ld Avg:%8ld"), the same ns.
  REQUIRE(run_binary("-t 2 -i 1000 -l 20 -q -N --policy=other --json=" + json_out.path,
                     out.path) == 0);
  j = parse_json(slurp(json_out.path));
  const std::string text = slurp(out.path);
  CAPTURE(text);
  for (const char* t : {"0", "1"}) {
    CAPTURE(t);
    const json& th = j["thread"][t];
    const status_line s = status_of(text, std::stoi(t));
    CHECK(s.cycles == static_cast<unsigned long long>(th["cycles"].num()));
    CHECK(static_cast<double>(s.min) == th["min"].num());
    CHECK(static_cast<double>(s.max) == th["max"].num());
    CHECK(static_cast<double>(s.avg) == std::floor(th["avg"].num()));
    CHECK(s.max == static_cast<long>(j["urt"]["threads"][t]["max_ns"].num()));
  }
  const std::string first = lines_of(text).back();
  CHECK(first.find(" Avg:") - first.find(" Act:") == 5 + 8);  // %8ld

  // Without -N the same JSON fields are the whole us of urt's ns: x1000.
  REQUIRE(run_binary("-t 1 -i 1000 -l 20 -q --policy=other --json=" + json_out.path, out.path) == 0);
  const json k = parse_json(slurp(json_out.path));
  CHECK(k["resolution_in_ns"].num() == 0);
  CHECK(k["thread"]["0"]["min"].num() == std::floor(k["urt"]["threads"]["0"]["min_ns"].num() / 1000));
  CHECK(k["thread"]["0"]["max"].num() == std::floor(k["urt"]["threads"]["0"]["max_ns"].num() / 1000));
  const std::string us = lines_of(slurp(out.path)).back();
  CHECK(us.find(" Avg:") - us.find(" Act:") == 5 + 5);  // %5ld
}

TEST_CASE("binary: a thread that takes no sample reports as cyclictest's: its tid, its CPU, Min 1000000") {
  // -d 100000 -l 5: thread 1's first release (101 ms) comes after thread 0's
  // five (5 ms) and the run ends. It used to say tid 0 on its T: line, and
  // min 0 with cpu and node -1 in the JSON and 00000 in the footer, where
  // cyclictest (and urt's own T: line) say 1000000.
  temp_file json_out("json");
  temp_file out("out");
  REQUIRE(run_binary("-t 2 -i 1000 -d 100000 -l 5 -q --policy=other --json=" + json_out.path,
                     out.path) == 0);
  const std::string text = slurp(out.path);
  CAPTURE(text);
  const status_line t0 = status_of(text, 0);
  const status_line t1 = status_of(text, 1);
  REQUIRE(t1.index == 1);
  CHECK(t0.cycles == 5);
  CHECK(t1.cycles == 0);
  CHECK(t1.tid > 0);
  // Two workers where two CPUs are allowed: two threads (with one, both
  // series share the one worker).
  const bool two_workers = allowed_cpu_count() >= 2;
  if (two_workers) CHECK(t1.tid != t0.tid);
  CHECK(t1.min == 1000000);
  const json j = parse_json(slurp(json_out.path));
  CHECK(j["thread"]["1"]["cycles"].num() == 0);
  CHECK(j["thread"]["1"]["min"].num() == 1000000);
  CHECK(j["thread"]["1"]["cpu"].num() >= 0);
  CHECK(j["thread"]["1"]["node"].num() >= 0);
  if (two_workers) CHECK(j["thread"]["1"]["cpu"].num() != j["thread"]["0"]["cpu"].num());
  // With -h the histogram's footer stands for the T: lines.
  // -h sets -d to 0 (as cyclictest): -A 200000 starts thread 1 200 ms late.
  REQUIRE(run_binary("-t 2 -i 1000 -A 200000 -l 5 -q -h 3 --policy=other", out.path) == 0);
  const std::string histogram = slurp(out.path);
  CAPTURE(histogram);
  bool footer = false;
  for (const std::string& line : lines_of(histogram)) {
    if (line.starts_with("# Min Latencies:")) {
      footer = true;
      CHECK(line.ends_with(" 1000000"));
    }
  }
  CHECK(footer);
}

TEST_CASE("binary: -b stops the run at the first latency above it and prints the break lines") {
  temp_file json_out("json");
  temp_file out("out");
  // -N -b 1: any latency above 1 ns, i.e. the first sample of any thread
  // (at_release: the worker sleeps to the release, as the kernel tool).
  REQUIRE(run_binary("-t 2 -i 1000 -l 1000 -q -N -b 1 --timer-wake=at_release --policy=other "
                     "--json=" +
                         json_out.path,
                     out.path) == 0);  // cyclictest exits 0 too
  const std::string text = slurp(out.path);
  CAPTURE(text);
  const json j = parse_json(slurp(json_out.path));
  const status_line t0 = status_of(text, 0);
  const status_line t1 = status_of(text, 1);
  // No thread ran on: the one that broke has its sample, the other at most
  // the one it was waiting for.
  CHECK(t0.cycles <= 1);
  CHECK(t1.cycles <= 1);
  const auto lines = lines_of(text);
  REQUIRE(lines.size() >= 3);
  const std::size_t n = lines.size();
  char ids[64];
  std::snprintf(ids, sizeof ids, "# Thread Ids: %05d %05d", t0.tid, t1.tid);
  CHECK(lines[n - 3] == ids);
  int tid = 0;
  long long value = 0;
  REQUIRE(std::sscanf(lines[n - 2].c_str(), "# Break thread: %d", &tid) == 1);
  REQUIRE(std::sscanf(lines[n - 1].c_str(), "# Break value: %lld", &value) == 1);
  REQUIRE((tid == t0.tid || tid == t1.tid));
  // The thread that broke (of those on that worker): its one sample is the
  // break value, in ns as -N.
  bool found = false;
  for (const auto& [t, s] : {std::pair{"0", t0}, std::pair{"1", t1}}) {
    found = found || (s.tid == tid && j["thread"][t]["cycles"].num() == 1 &&
                      j["thread"][t]["max"].num() == static_cast<double>(value));
  }
  CHECK(found);
  CHECK(value > 1);

  // Not exceeded: the thread ids only, and the run goes to its -l.
  REQUIRE(run_binary("-t 2 -i 1000 -l 5 -q -b 2147483647 --policy=other", out.path) == 0);
  const std::string quiet = slurp(out.path);
  CAPTURE(quiet);
  CHECK(std::max(status_of(quiet, 0).cycles, status_of(quiet, 1).cycles) == 5);
  CHECK(lines_of(quiet).back().starts_with("# Thread Ids: "));
  CHECK(quiet.find("# Break") == std::string::npos);
  // -b 0, as cyclictest: no threshold, no lines.
  REQUIRE(run_binary("-t 1 -i 1000 -l 3 -q -b 0 --policy=other", out.path) == 0);
  CHECK(slurp(out.path).find("# Thread Ids") == std::string::npos);
}

TEST_CASE("binary: -l with several threads: the run ends for all when thread 0 has its loops") {
  temp_file json_out("json");
  temp_file out("out");
  // Thread 1 at 1.001 s would need 20 s for its 20 loops.
  REQUIRE(run_binary("-t 2 -i 1000 -d 1000000 -l 20 -q --policy=other --json=" + json_out.path,
                     out.path) == 0);
  const json j = parse_json(slurp(json_out.path));
  CHECK(j["thread"]["0"]["cycles"].num() == 20);
  CHECK(j["thread"]["1"]["cycles"].num() < 20);
  const std::string text = slurp(out.path);
  CHECK(status_of(text, 0).cycles == 20);
  CHECK(status_of(text, 1).interval == 1001000);
  CHECK(status_of(text, 1).cycles < 20);
}

TEST_CASE("binary: -H adds the summary column over all threads") {
  temp_file out("out");
  REQUIRE(run_binary("-t 2 -i 1000 -l 20 -q -H 30 --policy=other", out.path) == 0);
  const auto lines = lines_of(slurp(out.path));
  std::size_t at = 0;
  while (at < lines.size() && lines[at] != "# Histogram") ++at;
  REQUIRE(at + 37 < lines.size());
  unsigned long long sums[3] = {0, 0, 0};
  for (std::size_t b = 0; b < 30; ++b) {
    unsigned long long c0 = 0, c1 = 0, all = 0;
    unsigned bucket = 0;
    REQUIRE(std::sscanf(lines[at + 1 + b].c_str(), "%u %llu\t%llu\t%llu", &bucket, &c0, &c1, &all) ==
            4);
    CHECK(bucket == b);
    CHECK(all == c0 + c1);
    sums[0] += c0;
    sums[1] += c1;
    sums[2] += all;
  }
  unsigned long long t0 = 0, t1 = 0, t_all = 0;
  REQUIRE(std::sscanf(lines[at + 31].c_str(), "# Total: %llu %llu %llu", &t0, &t1, &t_all) == 3);
  CHECK(t0 == sums[0]);
  CHECK(t_all == sums[2]);
  long m0 = 0, m1 = 0, m_all = 0;
  REQUIRE(std::sscanf(lines[at + 34].c_str(), "# Max Latencies: %ld %ld %ld", &m0, &m1, &m_all) ==
          3);
  CHECK(m_all == std::max(m0, m1));
  unsigned long long o0 = 0, o1 = 0, o_all = 0;
  REQUIRE(std::sscanf(lines[at + 35].c_str(), "# Histogram Overflows: %llu %llu %llu", &o0, &o1,
                      &o_all) == 3);
  CHECK(o_all == o0 + o1);
  CHECK(t0 + o0 + t1 + o1 == t_all + o_all);
}

TEST_CASE("binary: -v prints every sample as n:c:v, after cyclictest's preamble") {
  temp_file json_out("json");
  temp_file out("out");
  REQUIRE(run_binary("-t 2 -i 1000 -l 20 -v -q -N --policy=other --json=" + json_out.path,
                     out.path) == 0);
  const std::string text = slurp(out.path);
  CAPTURE(text);
  const json j = parse_json(slurp(json_out.path));
  const auto lines = lines_of(text);
  REQUIRE(lines.size() > 4);
  CHECK(lines[0].starts_with("Max CPUs = "));
  CHECK(lines[1].starts_with("Online CPUs = "));
  // cyclictest prints the next thread's interval here (it adds -d first).
  CHECK(text.find("Thread 0 Interval: 1500\nThread 1 Interval: 2000\n") != std::string::npos);
  const std::vector<sample> all = samples_of(text);
  for (unsigned t = 0; t < 2; ++t) {
    CAPTURE(t);
    const json& th = j["thread"][std::to_string(t)];
    std::vector<sample> mine;
    for (const sample& s : all) {
      if (s.thread == t) mine.push_back(s);
    }
    // Every sample, in order, each within the thread's min and max (ns).
    REQUIRE(static_cast<double>(mine.size()) == th["cycles"].num());
    long long most = 0;
    for (std::size_t c = 0; c < mine.size(); ++c) {
      CHECK(mine[c].cycle == c);
      CHECK(static_cast<double>(mine[c].value) >= th["min"].num());
      CHECK(static_cast<double>(mine[c].value) <= th["max"].num());
      most = std::max(most, mine[c].value);
    }
    CHECK(static_cast<double>(most) == th["max"].num());
  }
  // -q: cyclictest's summary after the samples.
  CHECK(text.find("T: 0 (") > text.rfind("       1:"));
  CHECK(std::max(status_of(text, 0).cycles, status_of(text, 1).cycles) == 20);

  // -o 5: the max of every 5 samples, with its cycle.
  REQUIRE(run_binary("-t 1 -i 1000 -l 20 -v -o 5 --policy=other --json=" + json_out.path,
                     out.path) == 0);
  const std::string reduced = slurp(out.path);
  CAPTURE(reduced);
  const std::vector<sample> groups = samples_of(reduced);
  REQUIRE(groups.size() == 4);
  long long most = 0;
  for (std::size_t g = 0; g < 4; ++g) {
    CHECK(groups[g].cycle >= 5 * g);
    CHECK(groups[g].cycle < 5 * g + 5);
    most = std::max(most, groups[g].value);
  }
  CHECK(static_cast<double>(most) == parse_json(slurp(json_out.path))["thread"]["0"]["max"].num());
  // Without -q: no frames, no status lines, as cyclictest.
  CHECK(reduced.find("policy:") == std::string::npos);
  CHECK(reduced.find("T: 0") == std::string::npos);
}

TEST_CASE("binary: -u writes -v's samples at once, while the run goes on") {
  temp_file out("out");
  const pid_t pid = start_binary({"-t", "1", "-i", "1000", "-v", "-u", "-q", "--policy=other"},
                                 out.path);
  // An endless run: a sample line shows up in the file before it ends
  // (block-buffered, 27 bytes would wait for 4 KiB).
  CHECK(eventually([&] { return !samples_of(slurp(out.path)).empty(); }));
  CHECK(kill(pid, 0) == 0);  // still running
  CHECK(interrupt(pid) == 0);
}

TEST_CASE("binary: -M draws a frame only after a new max, and ends with the cursor moved down") {
  temp_file out("out");
  REQUIRE(run_binary("-t 2 -i 1000 -l 50 -M --policy=other", out.path) == 0);
  const std::string text = slurp(out.path);
  CAPTURE(text);
  CHECK(text.find("policy: other/other: loadavg: ") != std::string::npos);
  // cyclictest's end: ESC[4B after the last frame or after the ESC[4A that
  // waited for the next one; nothing after it.
  REQUIRE(text.ends_with("\033[4B"));
  const std::string before = text.substr(0, text.size() - 4);
  CHECK((before.ends_with("\n") || before.ends_with("\n\033[4A")));
  CHECK(text.find("\033[4B") == text.size() - 4);
}

TEST_CASE("binary: --priospread runs thread n at -p - n") {
  temp_file out("out");
  temp_file err("err");
  REQUIRE(run_binary("-t 3 -p 10 --priospread -i 1000 -l 5 -q", out.path, err.path) == 0);
  std::string text = slurp(out.path);
  CAPTURE(text);
  CHECK(status_of(text, 0).priority == 10);
  CHECK(status_of(text, 1).priority == 9);
  CHECK(status_of(text, 2).priority == 8);
  // Down to 0: that thread is normal work, cyclictest's "fifo/other".
  REQUIRE(run_binary("-t 3 -p 2 --priospread -i 1000 -l 5", out.path, err.path) == 0);
  text = slurp(out.path);
  CHECK(text.find("policy: fifo/other: loadavg: ") != std::string::npos);
  CHECK(status_of(text, 2).priority == 0);
  // Without -p, one thread per worker: threads + 1 down, said on stderr.
  REQUIRE(run_binary("'--topology=synthetic:core:3 pu:1' -t --priospread -i 1000 -l 5 -q",
                     out.path, err.path) == 0);
  text = slurp(out.path);
  CHECK(status_of(text, 0).priority == 4);
  CHECK(status_of(text, 2).priority == 2);
  CHECK(slurp(err.path).find("--priospread: no -p/--priority: defaulting realtime priority to 4") !=
        std::string::npos);
  // Below 0: exit 2, naming the flags, before the run.
  CHECK(run_binary("-t 3 -p 1 --priospread -l 5 -q", out.path, err.path) == 2);
  CHECK(slurp(err.path).find("urt-cyclictest: --priospread: -p/--priority '1' with -t/--threads "
                             "'3' gives thread 2 the priority 1 - 2, below 0") != std::string::npos);
  CHECK(status_of(slurp(out.path), 0).index == -1);  // nothing was measured
  CHECK(run_binary("'--topology=synthetic:core:4 pu:1' -t -p 2 --priospread -l 5 -q", out.path,
                   err.path) == 2);
  CHECK(slurp(err.path).find("with -t/--threads (one per worker: 4) gives thread 3") !=
        std::string::npos);
}

TEST_CASE("binary: --secaligned and -A place the first releases as cyclictest's threads") {
  temp_file json_out("json");
  // --secaligned 250: every thread starts at the next full second + 250 us;
  // its first release is one interval later.
  REQUIRE(run_binary("-t 2 -i 1000 -l 3 -q --secaligned 250 --policy=other --json=" +
                     json_out.path) == 0);
  json j = parse_json(slurp(json_out.path));
  const auto first = [&](const char* t) {
    return static_cast<long long>(j["urt"]["threads"][t]["first_release_ns"].num());
  };
  CHECK((first("0") - 1000000) % 1000000000 == 250000);
  CHECK((first("1") - 1500000) % 1000000000 == 250000);  // -d 500: 1500 us
  CHECK(first("1") - first("0") == 500000);
  // -A 100 (-h: one interval): thread n starts 100 us after thread n - 1.
  REQUIRE(run_binary("-t 3 -i 1000 -l 3 -q -h 10 -A 100 --policy=other --json=" + json_out.path) ==
          0);
  j = parse_json(slurp(json_out.path));
  CHECK(first("1") - first("0") == 100000);
  CHECK(first("2") - first("0") == 200000);
  // -A alone: offset 0, all at one start; without either, the same.
  REQUIRE(run_binary("-t 2 -i 1000 -l 3 -q -h 10 -A --policy=other --json=" + json_out.path) == 0);
  j = parse_json(slurp(json_out.path));
  CHECK(first("1") == first("0"));
}

TEST_CASE("binary: --mainaffinity pins the main thread, -a CPULIST too, as cyclictest") {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) {
    MESSAGE("skipped: CPUs 0 and 1 are not both allowed here");
    return;
  }
  temp_file out("out");
  pid_t pid = start_binary({"-t", "1", "-i", "1000", "-q", "--policy=other", "--mainaffinity=1"},
                           out.path);
  // The main thread (tid = pid) is pinned once the series are spawned.
  CHECK(eventually([&] { return cpus_allowed(pid, pid) == "1"; }));
  CHECK(interrupt(pid) == 0);
  // -a 0: cyclictest pins its main thread to -a's CPUs, and --mainaffinity
  // after the threads start wins.
  pid = start_binary({"-t", "1", "-i", "1000", "-q", "--policy=other", "-a", "0"}, out.path);
  CHECK(eventually([&] { return cpus_allowed(pid, pid) == "0"; }));
  CHECK(interrupt(pid) == 0);
  pid = start_binary(
      {"-t", "1", "-i", "1000", "-q", "--policy=other", "-a", "0", "--mainaffinity", "1"}, out.path);
  CHECK(eventually([&] { return cpus_allowed(pid, pid) == "1"; }));
  CHECK(interrupt(pid) == 0);
}

TEST_CASE("binary: --spike lists the latencies above the trigger, at most --spike-nodes of them") {
  temp_file json_out("json");
  temp_file out("out");
  // -N --spike=1: every sample is a spike (above 1 ns).
  REQUIRE(run_binary("-t 1 -i 1000 -l 10 -q -N --spike=1 --spike-nodes=3 "
                     "--timer-wake=at_release --policy=other --json=" +
                         json_out.path,
                     out.path) == 0);
  const std::string text = slurp(out.path);
  CAPTURE(text);
  const json j = parse_json(slurp(json_out.path));
  const auto lines = lines_of(text);
  std::size_t at = 0;
  while (at < lines.size() && !lines[at].starts_with("T: 0 (")) ++at;
  REQUIRE(at + 6 < lines.size());
  CHECK(lines[at + 1].empty());
  long long last_ts = 0;
  for (std::size_t k = 0; k < 3; ++k) {
    unsigned t = 9;
    long long value = 0, ts = 0;
    REQUIRE(std::sscanf(lines[at + 2 + k].c_str(), "T:%u Spike:%lld: TS: %lld", &t, &value, &ts) ==
            3);
    CHECK(t == 0);
    CHECK(static_cast<double>(value) >= j["thread"]["0"]["min"].num());
    CHECK(static_cast<double>(value) <= j["thread"]["0"]["max"].num());
    // CLOCK_MONOTONIC us of the wake-up: from the first release on.
    CHECK(static_cast<double>(ts) * 1000 >=
          j["urt"]["threads"]["0"]["first_release_ns"].num() - 1000);
    CHECK(ts > last_ts);
    last_ts = ts;
  }
  CHECK(lines[at + 5] == "spikes = 10");
  CHECK(lines[at + 6].empty());
  // None above the trigger: nothing printed.
  REQUIRE(run_binary("-t 1 -i 1000 -l 5 -q --spike=2147483647 --policy=other", out.path) == 0);
  CHECK(slurp(out.path).find("Spike") == std::string::npos);
  CHECK(slurp(out.path).find("spikes") == std::string::npos);
}

// ---------------------------------------------------------------- limits

TEST_CASE("options: no measuring thread's interval may exceed 2^40 us") {
  CHECK(max_interval_us == std::uint64_t{1} << 40);
  // interval + n * distance for thread n: -i 1 -d 2^40 - 1 puts thread 1
  // exactly at the limit and thread 2 past it.
  CHECK(parse({"-t", "2", "-i", "1", "-d", "1099511627775"}).ok());
  parse_result r = parse({"-t", "3", "-i", "1", "-d", "1099511627775"});
  CHECK(r.error ==
        "-d/--distance: '1099511627775' gives thread 2 an interval of 1 + 2 * 1099511627775 us, "
        "above the limit of 1099511627776 us");
  r = parse({"-t", "1000", "-i", "1", "-d", "1099511627776"});
  CHECK(r.error.find("-d/--distance: '1099511627776' gives thread 999 an interval") == 0);
  // With -h every thread runs at -i (cyclictest ignores -d then).
  CHECK(parse({"-t", "1000", "-i", "1", "-d", "1099511627776", "-h", "10"}).ok());
  // -t without a number: checked once the worker count is known.
  r = parse({"-t", "-i", "1", "-d", "1099511627776"});
  REQUIRE(r.ok());
  CHECK(check_intervals(r.opts, 1).empty());
  CHECK(check_intervals(r.opts, 2).find("gives thread 1 an interval") != std::string::npos);
  CHECK(check_intervals(r.opts, 4000000000u).find("gives thread 3999999999") != std::string::npos);
}

TEST_CASE("options: extreme values of every time flag are rejected by name or land in range") {
  // The values a careless script or a fuzzer hands over: negative, zero,
  // one, the int64 and uint64 limits, and a number beyond 64 bits.
  const std::array<std::string, 7> extremes = {"-1",
                                               "0",
                                               "1",
                                               "9223372036854775807",
                                               "18446744073709551615",
                                               "-9223372036854775808",
                                               "99999999999999999999999"};
  const std::string not_number = "is not a non-negative whole number";
  const std::string not_duration =
      "is not a duration (a whole number with an optional s, m, h or d)";
  const std::string too_long = "is out of range: at most 4294967296 s (about 136 years)";
  const std::string us_range = "is out of range 0..1099511627776";
  const std::string interval_range = "is out of range 1..1099511627776";
  const std::string hist_range = "is out of range 1..1000000";
  const std::string ipi_range = "is out of range 1..1000000";
  const std::string negative_runtime = "has a negative runtime";
  const std::string negative_period = "has a negative period";
  const std::string above_period = "has a runtime above its period";
  const std::string above_max = "has a period above the maximum of 3600000000 us";
  struct time_flag {
    std::string spelling;  // "-i" (the value as the next argument) or "--timer-spin=" (attached)
    std::string name;      // how messages name the flag
    std::string pattern;   // the value given, V standing for each extreme
    std::array<std::string, 7> why;  // per extreme: why it is rejected; empty: accepted
    std::function<std::uint64_t(const options&)> parsed;  // accepted: the value it set...
    std::uint64_t scale;                                   // ...which is V * scale
  };
  const std::vector<time_flag> flags = {
      {"-i", "-i/--interval", "V",
       {not_number, interval_range, "", interval_range, interval_range, not_number, interval_range},
       [](const options& o) { return o.interval_us; }, 1},
      {"-d", "-d/--distance", "V",
       {not_number, "", "", us_range, us_range, not_number, us_range},
       [](const options& o) { return o.distance_us; }, 1},
      {"-D", "-D/--duration", "V",
       {not_duration, "", "", too_long, too_long, not_duration, too_long},
       [](const options& o) { return o.duration_s; }, 1},
      {"-D", "-D/--duration", "Vd",  // days: V * 86400 must not wrap
       {not_duration, "", "", too_long, too_long, not_duration, too_long},
       [](const options& o) { return o.duration_s; }, 86400},
      {"-h", "-h/--histogram", "V",
       {not_number, hist_range, "", hist_range, hist_range, not_number, hist_range},
       [](const options& o) { return o.histogram_us; }, 1},
      {"--timer-spin=", "--timer-spin", "V",
       {not_number, "", "", us_range, us_range, not_number, us_range},
       [](const options& o) { return o.timer_spin_us; }, 1},
      {"--idle-spin=", "--idle-spin", "V",
       {not_number, "", "", us_range, us_range, not_number, us_range},
       [](const options& o) { return o.idle_spin_us.value(); }, 1},
      {"--ipi-timeout=", "--ipi-timeout", "V",
       {not_number, ipi_range, "", ipi_range, ipi_range, not_number, ipi_range},
       [](const options& o) { return static_cast<std::uint64_t>(o.ipi_timeout_us.value()); }, 1},
      {"--bandwidth=", "--bandwidth", "V/10000",
       {negative_runtime, "", "", above_period, above_period, negative_runtime, above_period},
       [](const options& o) { return static_cast<std::uint64_t>(o.bandwidth.runtime.count()); },
       1000},
      {"--bandwidth=", "--bandwidth", "0/V",
       {negative_period, "has a zero period", "", above_max, above_max, negative_period, above_max},
       [](const options& o) { return static_cast<std::uint64_t>(o.bandwidth.period.count()); },
       1000},
      {"--bandwidth=", "--bandwidth", "V/V",
       {negative_runtime, "has a zero period", "", above_max, above_max, negative_runtime,
        above_max},
       [](const options& o) { return static_cast<std::uint64_t>(o.bandwidth.runtime.count()); },
       1000},
  };
  int accepted = 0;
  for (const time_flag& f : flags) {
    for (std::size_t i = 0; i < extremes.size(); ++i) {
      std::string value = f.pattern;
      for (std::size_t at; (at = value.find('V')) != std::string::npos;) {
        value.replace(at, 1, extremes[i]);
      }
      const std::vector<std::string> args =
          f.spelling.ends_with('=') ? std::vector<std::string>{f.spelling + value}
                                    : std::vector<std::string>{f.spelling, value};
      CAPTURE(args.front());
      CAPTURE(value);
      const parse_result r = parse(args);
      if (!f.why[i].empty()) {
        CHECK(r.error == f.name + ": '" + value + "' " + f.why[i]);
        continue;
      }
      // Accepted: the value it set is the one given, and the runtime takes
      // it, and every one of the most threads allowed gets an interval in
      // range.
      REQUIRE(r.ok());
      ++accepted;
      const std::uint64_t v = std::stoull(extremes[i]);
      CHECK(f.parsed(r.opts) == v * f.scale);
      CHECK_NOTHROW(r.opts.runtime_options().validate());
      CHECK(check_intervals(r.opts, static_cast<unsigned>(max_threads)).empty());
      CHECK(r.opts.interval_of(static_cast<unsigned>(max_threads) - 1) <= max_interval_us);
    }
  }
  // 0 and 1 for each row, but -i 0, -h 0 (as cyclictest), --ipi-timeout=0
  // and a zero period.
  CHECK(accepted == 2 * static_cast<int>(flags.size()) - 5);
}

TEST_CASE("binary: a thread interval above 2^40 us exits 2 before running") {
  temp_file out("out");
  temp_file err("err");
  CHECK(run_binary("-t 1000 -i 1 -d 1099511627776 -l 1 -q --policy=other", out.path, err.path) ==
        2);
  CHECK(slurp(err.path).find("-d/--distance: '1099511627776'") != std::string::npos);
  // One thread per worker: the check needs the worker count.
  CHECK(run_binary("'--topology=synthetic:core:3 pu:1' -t -i 1 -d 1099511627776 -l 1 -q "
                   "--policy=other",
                   out.path, err.path) == 2);
  CHECK(slurp(err.path).find("-d/--distance: '1099511627776' gives thread 2 an interval") !=
        std::string::npos);
  CHECK(slurp(out.path).find("T: 0") == std::string::npos);  // nothing was measured
}

TEST_CASE("options: -t is at most urt::max_workers") {
  CHECK(max_threads == 1024);
  REQUIRE(parse({"-t", "1024"}).ok());
  for (const std::string t : {"1025", "10000", "65536"}) {
    CAPTURE(t);
    CHECK(parse({"-t", t}).error == "-t/--threads: '" + t + "' is out of range 1..1024");
  }
  temp_file err("err");
  CHECK(run_binary("-t 65536 -l 1 -q --policy=other", "/dev/null", err.path) == 2);
  CHECK(slurp(err.path).find("-t/--threads: '65536' is out of range 1..1024") != std::string::npos);
}

TEST_CASE("options: the -h histograms of all -t threads may take at most 1 GiB") {
  CHECK(max_histogram_bytes == std::uint64_t{1} << 30);
  CHECK(histogram_bucket_bytes == 16);
  // threads x US x 16 bytes: 64 x 1000000 x 16 = 1024000000 fits, and so
  // does 67 x 1000000 x 16; 68 does not. 1024 x 65536 x 16 is exactly 2^30.
  CHECK(parse({"-t", "64", "-h", "1000000"}).ok());
  CHECK(parse({"-t", "67", "-h", "1000000"}).ok());
  CHECK(parse({"-t", "68", "-h", "1000000"}).error ==
        "-h/--histogram: '1000000' with -t/--threads '68' needs 1088000000 bytes of histograms "
        "(68 threads x 1000000 buckets x 16 bytes), above the limit of 1073741824 bytes (1 GiB): "
        "at most -h 986895 for 68 threads");
  CHECK(parse({"-t", "1024", "-h", "65536"}).ok());
  CHECK(parse({"-t", "1024", "-h", "65537"}).error ==
        "-h/--histogram: '65537' with -t/--threads '1024' needs 1073758208 bytes of histograms "
        "(1024 threads x 65537 buckets x 16 bytes), above the limit of 1073741824 bytes (1 GiB): "
        "at most -h 65536 for 1024 threads");
  CHECK(parse({"-h", "1000000", "-t", "1024"}).error ==
        "-h/--histogram: '1000000' with -t/--threads '1024' needs 16384000000 bytes of "
        "histograms (1024 threads x 1000000 buckets x 16 bytes), above the limit of 1073741824 "
        "bytes (1 GiB): at most -h 65536 for 1024 threads");
  // Without -h a thread keeps 10000 buckets for its percentiles: never refused.
  CHECK(parse({"-t", "1024"}).ok());
  // -t without a number: checked once the worker count is known.
  const parse_result r = parse({"-t", "-h", "1000000"});
  REQUIRE(r.ok());
  CHECK(check_histogram_memory(r.opts, 67).empty());
  CHECK(check_histogram_memory(r.opts, 128) ==
        "-h/--histogram: '1000000' with -t/--threads (one per worker: 128) needs 2048000000 "
        "bytes of histograms (128 threads x 1000000 buckets x 16 bytes), above the limit of "
        "1073741824 bytes (1 GiB): at most -h 524288 for 128 threads");
  // Any count: no overflow, and still the same rule.
  CHECK(check_histogram_memory(r.opts, 4294967295u).find("needs 68719476720000000 bytes") !=
        std::string::npos);
  CHECK(check_histogram_memory(parse({"-t", "-h", "1"}).opts, 67108864).empty());
  CHECK_FALSE(check_histogram_memory(parse({"-t", "-h", "1"}).opts, 67108865).empty());
}

TEST_CASE("binary: histograms above 1 GiB exit 2 before running") {
  temp_file out("out");
  temp_file err("err");
  CHECK(run_binary("-t 1024 -h 1000000 -l 1 -q --policy=other", out.path, err.path) == 2);
  CHECK(slurp(err.path).find("-h/--histogram: '1000000' with -t/--threads '1024' needs "
                             "16384000000 bytes of histograms") != std::string::npos);
  CHECK(slurp(out.path).find("T: 0") == std::string::npos);  // nothing was measured
  // One thread per worker: the check needs the worker count.
  CHECK(run_binary("'--topology=synthetic:pu:128' -t -h 1000000 -l 1 -q --policy=other", out.path,
                   err.path) == 2);
  CHECK(slurp(err.path).find("-h/--histogram: '1000000' with -t/--threads (one per worker: 128) "
                             "needs 2048000000 bytes") != std::string::npos);
  CHECK(slurp(out.path).find("T: 0") == std::string::npos);
}

TEST_CASE("binary: an unwritable --json or --histfile exits 2 before running") {
  const std::string missing_dir =
      (std::filesystem::temp_directory_path() / "urt-cyclictest-no-such-dir").string();
  const std::string dir = std::filesystem::temp_directory_path().string();
  temp_file out("out");
  temp_file err("err");
  for (const std::string& args :
       {"--json=" + missing_dir + "/x.json", "--json=" + dir,
        "-h 10 --histfile=" + missing_dir + "/x.hist", "-h 10 --histfile=" + dir}) {
    CAPTURE(args);
    // -l 1000 -i 1000: a second of measurement, were the run to start.
    CHECK(run_binary("-t 1 -i 1000 -l 1000 -q --policy=other " + args, out.path, err.path) == 2);
    const std::string text = slurp(err.path);
    CAPTURE(text);
    const std::string flag = args.find("--json") != std::string::npos ? "--json" : "--histfile";
    const std::string path = args.substr(args.find('=') + 1);
    CHECK(text.find(flag + ": '" + path + "' cannot be opened for writing: ") != std::string::npos);
    CHECK(slurp(out.path).find("T: 0") == std::string::npos);  // nothing was measured
  }
}
