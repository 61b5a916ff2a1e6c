// Per-thread latency accounting for urt-cyclictest: min/act/avg/max and a
// 1 us histogram with an overflow count, recorded without allocation by one
// writer (the measuring task's worker) and read racily for the live display.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace urt_cyclictest {

/// Nanoseconds to cyclictest's microseconds: truncation toward zero, as
/// cyclictest's calcdiff() divides the nanosecond difference by 1000.
[[nodiscard]] constexpr std::int64_t ns_to_us(std::int64_t ns) noexcept { return ns / 1000; }

/// Nearest-rank percentile `q` (0 < q <= 1) of a 1 us histogram: the
/// smallest bucket b with count(<= b) >= ceil(q * total), total counting the
/// overflows too. A rank that lands in the overflows returns `max_us` (the
/// exact max, an upper bound of the true percentile). 0 when empty.
[[nodiscard]] std::int64_t percentile_us(std::span<const std::uint64_t> histogram,
                                         std::uint64_t overflows, std::int64_t max_us, double q);

class alignas(64) latency_stats {
 public:
  /// `buckets`: histogram size in us (latencies >= buckets overflow);
  /// `max_overflow_cycles`: how many overflowing cycle numbers to remember
  /// (cyclictest keeps as many as there are buckets). Allocates here only.
  explicit latency_stats(std::size_t buckets, std::size_t max_overflow_cycles = 0);

  /// Records one latency. Single writer; no allocation, no system call.
  void record(std::int64_t latency_ns) noexcept;

  // Racy readers (relaxed loads; for the live display and stop checks).
  [[nodiscard]] std::uint64_t cycles() const noexcept {
    return cycles_.load(std::memory_order_relaxed);
  }
  /// 0 while no cycle has been recorded.
  [[nodiscard]] std::int64_t min_ns() const noexcept;
  [[nodiscard]] std::int64_t max_ns() const noexcept {
    return max_ns_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::int64_t act_ns() const noexcept {
    return act_ns_.load(std::memory_order_relaxed);
  }
  /// cyclictest's average: the mean of the per-cycle whole-us latencies.
  [[nodiscard]] double avg_us() const noexcept;
  /// The exact mean in ns.
  [[nodiscard]] double avg_ns() const noexcept;
  [[nodiscard]] std::int64_t min_us() const noexcept { return ns_to_us(min_ns()); }
  [[nodiscard]] std::int64_t max_us() const noexcept { return ns_to_us(max_ns()); }
  [[nodiscard]] std::int64_t act_us() const noexcept { return ns_to_us(act_ns()); }

  // Once the writer has finished (joined): the histogram and overflows.
  [[nodiscard]] std::span<const std::uint64_t> histogram() const noexcept { return histogram_; }
  [[nodiscard]] std::uint64_t overflows() const noexcept { return overflows_; }
  /// Cycle numbers (0-based) of the first overflows.
  [[nodiscard]] std::span<const std::uint64_t> overflow_cycles() const noexcept {
    return {overflow_cycles_.data(), overflow_count_};
  }
  [[nodiscard]] std::int64_t percentile_us(double q) const noexcept {
    return urt_cyclictest::percentile_us(histogram_, overflows_, max_us(), q);
  }

 private:
  // Written only by the recording worker (load + store, no RMW); relaxed.
  std::atomic<std::uint64_t> cycles_{0};
  std::atomic<std::int64_t> min_ns_{0};
  std::atomic<std::int64_t> max_ns_{0};
  std::atomic<std::int64_t> act_ns_{0};
  std::atomic<std::int64_t> sum_us_{0};
  std::atomic<std::int64_t> sum_ns_{0};
  std::vector<std::uint64_t> histogram_;
  std::uint64_t overflows_ = 0;
  std::vector<std::uint64_t> overflow_cycles_;
  std::size_t overflow_count_ = 0;
};

}  // namespace urt_cyclictest
