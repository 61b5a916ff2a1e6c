// options: urt-loadgen's command line (usage_text() lists every flag).
// Every flag takes --name=value or --name value. A bad value is an error
// naming the flag and the value (parse_options throws usage_error; the
// program exits 2).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace loadgen {

struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// What a bulk connection sends.
enum class bulk_command { work, keys };

/// A server under test: one started from --server (mode "urt" or "asio"),
/// or one already running (--target NAME=HOST:PORT; mode empty).
struct target {
  std::string name;
  std::string mode;  ///< urt-kv --mode; empty: not started by us
  std::string host;  ///< --target only
  std::uint16_t port = 0;
};

struct options {
  std::string server;                    ///< urt-kv's path; empty: --target only
  std::vector<std::string> server_args;  ///< --server-args, split at blanks
  std::vector<std::string> modes{"urt", "asio"};
  std::vector<int> server_cpus;  ///< affinity of a started server; empty: inherited
  std::vector<int> client_cpus;  ///< affinity of the load generator; empty: unchanged
  std::vector<target> targets;   ///< --target, in order
  std::string baseline;          ///< 100% and the ratios' denominator; empty: see resolve_targets
  std::vector<double> points{10, 25, 50, 75, 90, 100, 120};  ///< % of capacity
  double duration_s = 2.0;           ///< measured time per point and round
  /// Sweeps per server, the servers taking turns sweep by sweep; each
  /// point's figures are over the samples of every round together.
  unsigned rounds = 3;
  double warmup_s = 0.5;             ///< unmeasured lead of each point and of the capacity run
  double capacity_s = 1.0;           ///< measured time of the capacity run
  std::optional<double> capacity;    ///< bulk requests/s taken as 100% (no capacity run)
  double timeout_s = 5.0;            ///< no reply for this long: an error
  /// --spin-us: busy-poll when the next send is this close (0: sleep until
  /// it; spin_always: never sleep); unset: client_spin_us() decides.
  std::optional<std::uint32_t> spin_us;
  int client_priority = 0;           ///< SCHED_FIFO priority of the load generator; 0: SCHED_OTHER
  bulk_command bulk = bulk_command::work;
  std::uint32_t work_us = 200;
  std::string keys_pattern;
  unsigned bulk_conns = 0;           ///< 0: 2 x the server's threads
  unsigned control_conns = 4;
  double control_rate = 1000;        ///< requests/s per control connection
  unsigned keys = 100;               ///< keys SET before the run, read by GET
  std::string json_path;
  std::string svg_path;
  bool help = false;
};

/// --spin-us always: the client never sleeps.
inline constexpr std::uint32_t spin_always = 0xffffffff;

/// How close to a send the client busy-polls: --spin-us when given; else
/// (auto) spin_always when the client and the started servers have CPUs of
/// their own (--client-cpus and --server-cpus given, none in both), where
/// a sleeping client would add its own wake-up lag to every send and every
/// reply of every server and its spinning takes no CPU from them; else 0
/// (sleep until each send), since spinning would take CPU time the servers
/// may need.
[[nodiscard]] std::uint32_t client_spin_us(const options& o) noexcept;

/// The options of argv[1..]; throws usage_error.
[[nodiscard]] options parse_options(const std::vector<std::string>& args);

/// The servers to run, in run order (the baseline first: its capacity sets
/// the offered rates of every server), and the baseline's name in `o`.
/// --server gives one target per --modes entry, named after it; --target
/// adds its own. The baseline is --baseline, else "asio" when there is
/// one, else the first. Throws usage_error (no server at all, a duplicate
/// name, an unknown --baseline).
[[nodiscard]] std::vector<target> resolve_targets(options& o);

/// urt-kv's thread count as --server-args sets it (--threads N or
/// --threads=N), else 0.
[[nodiscard]] unsigned server_threads(const options& o);

/// `s` seconds (a flag's value, or derived from flags: 1 / --control-rate,
/// connections / offered rate) as nanoseconds, rounded, saturating at a
/// day: a run's phases last at most 2 hours (--warmup + --duration), so a
/// longer interval means "not within the run", and a rate near 0 (an
/// infinite interval) cannot overflow. 0 for NaN and s <= 0.
[[nodiscard]] std::chrono::nanoseconds ns_of(double s) noexcept;

/// A cpulist such as "0-3,6"; throws usage_error naming `flag`.
[[nodiscard]] std::vector<int> parse_cpulist(const std::string& flag, const std::string& text);

[[nodiscard]] const char* usage_text() noexcept;

}  // namespace loadgen
