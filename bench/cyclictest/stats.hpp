// Per-thread latency accounting for urt-cyclictest: min/act/avg/max, a
// 1 us histogram with an overflow count as cyclictest keeps them, and the
// values of the samples above the histogram, so that percentiles are exact
// whatever the histogram size. Recorded without allocation by one writer
// (the measuring task's worker) and read racily for the live display.
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

/// The unit cyclictest reports latencies in: whole us, or ns with -N
/// (calcdiff_ns()). Min/act/avg/max, the -h histogram's buckets and its
/// overflows are counted in it.
enum class latency_unit { us, ns };

/// `ns` in `unit` (truncated to whole us as cyclictest's calcdiff()).
[[nodiscard]] constexpr std::int64_t in_unit(std::int64_t ns, latency_unit unit) noexcept {
  return unit == latency_unit::ns ? ns : ns_to_us(ns);
}

/// How many samples had one whole-us latency at or above the exact
/// histogram's range.
struct overflow_value {
  std::int64_t us = 0;
  std::uint64_t count = 0;
};

/// Nearest-rank percentile `q` (0 < q <= 1) of the samples in a 1 us
/// histogram plus `overflows`, the samples above it by value, sorted by
/// value: the smallest latency v with count(<= v) >= ceil(q * total), total
/// counting the overflows too. Exact wherever the rank falls. 0 when empty.
[[nodiscard]] std::int64_t percentile_us(std::span<const std::uint64_t> histogram,
                                         std::span<const overflow_value> overflows, double q);

/// The same when only the number of overflows is known (their values were
/// not kept): a rank that lands in the overflows returns `max_us`, the exact
/// max and so an upper bound of the true percentile.
[[nodiscard]] std::int64_t percentile_us(std::span<const std::uint64_t> histogram,
                                         std::uint64_t overflows, std::int64_t max_us, double q);

class alignas(64) latency_stats {
 public:
  /// 1 us buckets kept for the percentiles at least, whatever `buckets` is
  /// (10 ms): latencies below max(buckets, exact_buckets) us are counted
  /// there, those above by value in a table of their own.
  static constexpr std::size_t exact_buckets = 10000;
  /// Slots of the table of latencies above the exact buckets, each one
  /// distinct whole-us value and its count; at most three quarters are
  /// used (probes stay short), so max_overflow_values distinct values are
  /// kept exactly. Further distinct values are counted in
  /// untracked_overflows() and taken as the max by the percentiles.
  static constexpr std::size_t overflow_slots = 2048;
  static constexpr std::size_t max_overflow_values = overflow_slots / 4 * 3;

  /// `buckets`: histogram size in `unit` (latencies >= buckets overflow, as
  /// cyclictest's -h counts them; with -N its buckets are 1 ns wide, as
  /// cyclictest's); `max_overflow_cycles`: how many overflowing cycle
  /// numbers to remember (cyclictest keeps as many as there are buckets).
  /// Allocates here only: in us, the histogram is the first `buckets` of
  /// the exact 1 us buckets; in ns, `buckets` more 8-byte counts.
  explicit latency_stats(std::size_t buckets, std::size_t max_overflow_cycles = 0,
                         latency_unit unit = latency_unit::us);

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

  // The same in the reported unit (unit()): us, or ns with -N.
  [[nodiscard]] latency_unit unit() const noexcept { return unit_; }
  [[nodiscard]] std::int64_t min_value() const noexcept { return in_unit(min_ns(), unit_); }
  [[nodiscard]] std::int64_t max_value() const noexcept { return in_unit(max_ns(), unit_); }
  [[nodiscard]] std::int64_t act_value() const noexcept { return in_unit(act_ns(), unit_); }
  /// cyclictest's average: the mean of the per-cycle values in unit()
  /// (avg_us() or avg_ns()).
  [[nodiscard]] double avg_value() const noexcept {
    return unit_ == latency_unit::ns ? avg_ns() : avg_us();
  }

  // Once the writer has finished (joined): the histogram and overflows.
  /// cyclictest's histogram: `buckets` buckets of 1 unit() each.
  [[nodiscard]] std::span<const std::uint64_t> histogram() const noexcept {
    return unit_ == latency_unit::ns ? std::span<const std::uint64_t>(ns_hist_)
                                     : std::span<const std::uint64_t>(exact_.data(), buckets_);
  }
  /// Samples at or above `buckets` (in unit()), as cyclictest counts overflows.
  [[nodiscard]] std::uint64_t overflows() const noexcept { return overflows_; }
  /// Cycle numbers (0-based) of the first overflows.
  [[nodiscard]] std::span<const std::uint64_t> overflow_cycles() const noexcept {
    return {overflow_cycles_.data(), overflow_count_};
  }
  /// The 1 us buckets the percentiles use: max(buckets, exact_buckets).
  [[nodiscard]] std::span<const std::uint64_t> exact_histogram() const noexcept { return exact_; }
  /// The latencies above exact_histogram(), by value, sorted (allocates).
  [[nodiscard]] std::vector<overflow_value> overflow_values() const;
  /// Samples above exact_histogram() whose value found no slot in the
  /// table (more than max_overflow_values distinct values): 0 unless the
  /// percentiles may be an upper bound rather than exact.
  [[nodiscard]] std::uint64_t untracked_overflows() const noexcept { return untracked_; }
  /// Exact (see untracked_overflows()) nearest-rank percentile in us.
  [[nodiscard]] std::int64_t percentile_us(double q) const;

 private:
  // Written only by the recording worker (load + store, no RMW); relaxed.
  std::atomic<std::uint64_t> cycles_{0};
  std::atomic<std::int64_t> min_ns_{0};
  std::atomic<std::int64_t> max_ns_{0};
  std::atomic<std::int64_t> act_ns_{0};
  std::atomic<std::int64_t> sum_us_{0};
  std::atomic<std::int64_t> sum_ns_{0};
  std::size_t buckets_ = 0;
  latency_unit unit_ = latency_unit::us;
  std::vector<std::uint64_t> exact_;    // max(buckets_, exact_buckets) 1 us buckets (us: the
                                        // histogram's first buckets_; ns: exact_buckets)
  std::vector<std::uint64_t> ns_hist_;  // ns only: the histogram, buckets_ 1 ns buckets
  std::uint64_t overflows_ = 0;       // samples >= buckets_ us
  std::vector<std::uint64_t> overflow_cycles_;
  std::size_t overflow_count_ = 0;
  std::vector<overflow_value> table_;  // open addressing on us; count 0 = empty slot
  std::size_t table_used_ = 0;
  std::uint64_t untracked_ = 0;
};

}  // namespace urt_cyclictest
