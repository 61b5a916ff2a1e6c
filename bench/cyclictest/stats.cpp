#include "stats.hpp"

#include <algorithm>
#include <cmath>

namespace urt_cyclictest {

namespace {

// Nearest rank: the ceil(q * total)-th smallest sample (at least the 1st).
// The epsilon keeps 0.99 * 100 at rank 99, not 100 from rounding up.
std::uint64_t rank_of(double q, std::uint64_t total) {
  if (!(q > 0.0)) q = 0.0;  // also NaN
  if (q > 1.0) q = 1.0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total) - 1e-9));
  return rank == 0 ? 1 : rank;
}

}  // namespace

std::int64_t percentile_us(std::span<const std::uint64_t> histogram,
                           std::span<const overflow_value> overflows, double q) {
  std::uint64_t total = 0;
  for (const std::uint64_t c : histogram) total += c;
  for (const overflow_value& v : overflows) total += v.count;
  if (total == 0) return 0;
  const std::uint64_t rank = rank_of(q, total);
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < histogram.size(); ++b) {
    seen += histogram[b];
    if (seen >= rank) return static_cast<std::int64_t>(b);
  }
  for (const overflow_value& v : overflows) {
    seen += v.count;
    if (seen >= rank) return v.us;
  }
  return overflows.back().us;  // not reached: seen == total >= rank
}

std::int64_t percentile_us(std::span<const std::uint64_t> histogram, std::uint64_t overflows,
                           std::int64_t max_us, double q) {
  const overflow_value at_max{.us = max_us, .count = overflows};
  return percentile_us(histogram, std::span<const overflow_value>(&at_max, overflows != 0 ? 1 : 0),
                       q);
}

latency_stats::latency_stats(std::size_t buckets, std::size_t max_overflow_cycles,
                             latency_unit unit)
    : buckets_(buckets),
      unit_(unit),
      exact_(unit == latency_unit::ns ? exact_buckets : std::max(buckets, exact_buckets), 0),
      ns_hist_(unit == latency_unit::ns ? buckets : 0, 0),
      overflow_cycles_(max_overflow_cycles, 0),
      table_(overflow_slots) {}

void latency_stats::record(std::int64_t latency_ns) noexcept {
  const std::uint64_t n = cycles_.load(std::memory_order_relaxed);
  const std::int64_t us = ns_to_us(latency_ns);
  if (n == 0 || latency_ns < min_ns_.load(std::memory_order_relaxed)) {
    min_ns_.store(latency_ns, std::memory_order_relaxed);
  }
  if (n == 0 || latency_ns > max_ns_.load(std::memory_order_relaxed)) {
    max_ns_.store(latency_ns, std::memory_order_relaxed);
  }
  act_ns_.store(latency_ns, std::memory_order_relaxed);
  sum_us_.store(sum_us_.load(std::memory_order_relaxed) + us, std::memory_order_relaxed);
  sum_ns_.store(sum_ns_.load(std::memory_order_relaxed) + latency_ns, std::memory_order_relaxed);
  // A negative latency cannot happen (a release never starts early); count
  // it in bucket 0 rather than index out of range if a clock ever misbehaves.
  const std::uint64_t bucket = us < 0 ? 0 : static_cast<std::uint64_t>(us);
  // cyclictest's histogram, in the reported unit (the 1 us buckets below
  // are it in us).
  const std::uint64_t reported =
      unit_ == latency_unit::ns ? (latency_ns < 0 ? 0 : static_cast<std::uint64_t>(latency_ns))
                                : bucket;
  if (reported >= buckets_) {
    ++overflows_;
    if (overflow_count_ < overflow_cycles_.size()) overflow_cycles_[overflow_count_++] = n;
  } else if (unit_ == latency_unit::ns) {
    ++ns_hist_[reported];
  }
  if (bucket < exact_.size()) {
    ++exact_[bucket];
  } else {
    // Linear probing from a multiplicative hash of the value.
    const std::size_t mask = overflow_slots - 1;
    std::size_t i = static_cast<std::size_t>((bucket * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    for (;;) {
      overflow_value& slot = table_[i];
      if (slot.count != 0 && slot.us == static_cast<std::int64_t>(bucket)) {
        ++slot.count;
        break;
      }
      if (slot.count == 0) {
        if (table_used_ < max_overflow_values) {
          slot = {.us = static_cast<std::int64_t>(bucket), .count = 1};
          ++table_used_;
        } else {
          ++untracked_;
        }
        break;
      }
      i = (i + 1) & mask;
    }
  }
  cycles_.store(n + 1, std::memory_order_relaxed);
}

std::vector<overflow_value> latency_stats::overflow_values() const {
  std::vector<overflow_value> v;
  v.reserve(table_used_ + 1);
  for (const overflow_value& slot : table_) {
    if (slot.count != 0) v.push_back(slot);
  }
  std::sort(v.begin(), v.end(),
            [](const overflow_value& a, const overflow_value& b) { return a.us < b.us; });
  // Values that found no slot: all above the exact buckets, taken as the
  // max (an upper bound of each).
  if (untracked_ != 0) {
    if (!v.empty() && v.back().us == max_us()) {
      v.back().count += untracked_;
    } else {
      v.push_back({.us = max_us(), .count = untracked_});
    }
  }
  return v;
}

std::int64_t latency_stats::percentile_us(double q) const {
  const std::vector<overflow_value> over = overflow_values();
  return urt_cyclictest::percentile_us(exact_, over, q);
}

std::int64_t latency_stats::min_ns() const noexcept {
  return cycles() == 0 ? 0 : min_ns_.load(std::memory_order_relaxed);
}

double latency_stats::avg_us() const noexcept {
  const std::uint64_t n = cycles();
  return n == 0 ? 0.0
                : static_cast<double>(sum_us_.load(std::memory_order_relaxed)) /
                      static_cast<double>(n);
}

double latency_stats::avg_ns() const noexcept {
  const std::uint64_t n = cycles();
  return n == 0 ? 0.0
                : static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) /
                      static_cast<double>(n);
}

}  // namespace urt_cyclictest
