// metrics: urt-kv's counters and latency histograms, and the two ways it
// shows them: the INFO reply (Redis's "# Section" / "field:value" text)
// and the Prometheus text exposition format served at /metrics.
//
// Concurrency: every counter and bucket is a relaxed atomic; recording
// threads never wait for one another or for a reader. A histogram is split
// into shards, one per recording thread (up to shard_count; more threads
// share), so that threads do not bounce one cache line on every command.
// A snapshot reads each value once: a busy server's snapshot may be a
// little stale, but every count in it is one it really had.
#pragma once

#include <urt/stats.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

/// What a command is, for its priority and its metrics.
enum class command_class : unsigned { control = 0, bulk = 1 };
inline constexpr unsigned class_count = 2;
[[nodiscard]] std::string_view class_name(command_class c) noexcept;

/// Latency in nanoseconds, log-linear: exact below 8 ns, then 8 buckets per
/// power of two (a value is known within 12.5%).
class latency_histogram {
 public:
  static constexpr unsigned bucket_count = 8 + 61 * 8;
  static constexpr unsigned shard_count = 16;

  struct snapshot {
    std::array<std::uint64_t, bucket_count> counts{};
    std::uint64_t count = 0;
    std::uint64_t sum_ns = 0;
    /// The upper bound of the bucket holding quantile q (0 < q <= 1); 0
    /// when empty.
    [[nodiscard]] std::uint64_t quantile_ns(double q) const noexcept;
    /// Values of at most 2^e - 1 ns (exact: powers of two are bucket edges).
    [[nodiscard]] std::uint64_t count_below_pow2(unsigned e) const noexcept;
  };

  void record(std::uint64_t ns) noexcept;
  [[nodiscard]] snapshot read() const noexcept;

  static unsigned bucket_of(std::uint64_t ns) noexcept;
  static std::uint64_t upper_bound(unsigned bucket) noexcept;

 private:
  struct alignas(64) shard {
    std::array<std::atomic<std::uint64_t>, bucket_count> counts{};
    std::atomic<std::uint64_t> sum_ns{0};
  };
  std::array<shard, shard_count> shards_{};
};

/// The server's own counters (monotonic unless said otherwise).
struct server_counters {
  std::atomic<std::int64_t> connected{0};          ///< open connections now (a gauge)
  std::atomic<std::uint64_t> connections{0};       ///< connections accepted
  std::atomic<std::uint64_t> rejected{0};          ///< refused: --max-clients reached
  std::atomic<std::uint64_t> idle_timeouts{0};     ///< closed by --idle-timeout
  std::atomic<std::uint64_t> protocol_errors{0};   ///< malformed requests
  std::atomic<std::uint64_t> command_errors{0};    ///< -ERR replies to well-formed requests
  std::atomic<std::uint64_t> oversized{0};         ///< requests over --max-request
  std::array<latency_histogram, class_count> latency{};

  void add(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
};

/// Everything INFO and /metrics show, read at one moment.
struct metrics_view {
  std::string_view mode;  ///< "urt" or "asio"
  unsigned port = 0;
  unsigned threads = 0;
  std::size_t max_clients = 0;
  std::uint64_t idle_timeout_s = 0;  ///< --idle-timeout (0: none), CONFIG GET timeout
  std::uint64_t uptime_s = 0;
  std::uint64_t keys = 0;
  int priorities[class_count] = {0, 0};  ///< urt mode's task priority per class
  const server_counters* counters = nullptr;
  std::vector<urt::worker_stats> workers;  ///< urt mode only (empty in asio mode)
};

/// INFO's text. No section, or "all", "everything" or "default" among
/// them: every section; else those named (case-insensitive, several as in
/// Redis 7; unknown ones add nothing, as in Redis).
[[nodiscard]] std::string info_text(const metrics_view& v,
                                    std::span<const std::string_view> sections = {});
/// The Prometheus text exposition format (version 0.0.4).
[[nodiscard]] std::string prometheus_text(const metrics_view& v);

}  // namespace kv
