// report: urt-loadgen's results and their three forms: the table on
// stdout, --json and --svg (control p99 against bulk load, log scale).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loadgen {

/// Latency figures of one kind of request at one point, in microseconds.
struct latency_summary {
  std::uint64_t samples = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};

/// The exact nearest-rank percentile (0 < p <= 100) of ascending samples, in ns.
[[nodiscard]] std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) noexcept;

/// Sorts `ns` and summarizes it in microseconds.
[[nodiscard]] latency_summary summarize(std::vector<std::int64_t>& ns);

struct point_result {
  bool ran = false;              ///< false: the server failed before this point ran a round
  double percent = 0;            ///< of the baseline's capacity
  double offered = 0;            ///< bulk requests/s offered
  double bulk_rate = 0;          ///< bulk replies/s received within the measured window
  latency_summary control;       ///< measured control requests
  latency_summary bulk;          ///< measured bulk requests
  latency_summary lag;           ///< how late the client sent (actual - intended)
  std::uint64_t control_sent = 0, bulk_sent = 0;
  std::uint64_t control_errors = 0, bulk_errors = 0;
  std::vector<double> round_p99;  ///< control p99 (us) of each round alone, in run order
};

struct server_result {
  std::string name;
  std::string mode;              ///< empty: a --target
  std::string address;           ///< host:port it ran on
  double capacity = 0;           ///< closed-loop bulk replies/s; 0: not measured
  std::vector<point_result> points;  ///< one per percent, in order
  std::uint64_t setup_errors = 0;    ///< error replies outside the points (SET, capacity run)
  std::string first_error;       ///< the first error reply or unexpected reply seen
  std::string failure;           ///< empty, or why the run stopped (connection, timeout, exit status)
};

struct run_result {
  std::string bulk_label;        ///< e.g. "WORK 200"
  unsigned bulk_conns = 0, control_conns = 0;
  double control_rate = 0;       ///< per control connection
  double duration_s = 0, warmup_s = 0, capacity_s = 0, timeout_s = 0;
  unsigned rounds = 1;           ///< sweeps per server, in turns; points pool every round's samples
  bool capacity_given = false;   ///< --capacity: no capacity run
  double capacity = 0;           ///< bulk requests/s at 100%
  std::string baseline;
  std::string client;            ///< where the load generator ran, how it waited
  bool client_spun = false;      ///< it busy-polled all the time (--spin-us always or auto)
  std::vector<double> percents;
  std::vector<server_result> servers;  ///< in display order
};

/// The target for one server against the baseline, judged at the
/// saturating points (100% of the baseline's capacity and up): control p99
/// at most a tenth of the baseline's and bulk/s at least 80% of its.
struct target_point {
  double percent = 0;
  bool ran = false;           ///< both servers measured this point
  double p99_ratio = 0;       ///< control p99 over the baseline's
  double bulk_ratio = 0;      ///< bulk/s over the baseline's
  bool client_bound = false;  ///< the client's own send lag p99 is at least half the control p99
};
struct target_verdict {
  std::string server;
  std::vector<target_point> points;  ///< the saturating points, in sweep order
  bool met = false;                  ///< points is not empty and every one ran and met both bounds
};
inline constexpr double target_p99_ratio = 0.1;
inline constexpr double target_bulk_ratio = 0.8;
inline constexpr double saturating_percent = 100;

/// The verdict for every server but the baseline (none when the baseline is
/// missing from the results).
[[nodiscard]] std::vector<target_verdict> judge_targets(const run_result& r);

/// The aligned table (and the lines above it that say how it was measured),
/// then the targets' lines.
[[nodiscard]] std::string format_table(const run_result& r);

[[nodiscard]] std::string format_json(const run_result& r);

/// A standalone SVG document: x = bulk offered load (% of capacity), y =
/// control p99 (us, log scale), one polyline with markers per server.
[[nodiscard]] std::string format_svg(const run_result& r);

}  // namespace loadgen
