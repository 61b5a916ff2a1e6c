#include "stats.hpp"

#include <cmath>

namespace urt_cyclictest {

std::int64_t percentile_us(std::span<const std::uint64_t> histogram, std::uint64_t overflows,
                           std::int64_t max_us, double q) {
  std::uint64_t total = overflows;
  for (const std::uint64_t c : histogram) total += c;
  if (total == 0) return 0;
  if (!(q > 0.0)) q = 0.0;  // also NaN
  if (q > 1.0) q = 1.0;
  // Nearest rank: the ceil(q * total)-th smallest sample (at least the 1st).
  // The epsilon keeps 0.99 * 100 at rank 99, not 100 from rounding up.
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total) - 1e-9));
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < histogram.size(); ++b) {
    seen += histogram[b];
    if (seen >= rank) return static_cast<std::int64_t>(b);
  }
  return max_us;  // the rank is among the overflows
}

latency_stats::latency_stats(std::size_t buckets, std::size_t max_overflow_cycles)
    : histogram_(buckets, 0), overflow_cycles_(max_overflow_cycles, 0) {}

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
  if (bucket < histogram_.size()) {
    ++histogram_[bucket];
  } else {
    ++overflows_;
    if (overflow_count_ < overflow_cycles_.size()) overflow_cycles_[overflow_count_++] = n;
  }
  cycles_.store(n + 1, std::memory_order_relaxed);
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
