// wake_advance: the learned advance of a parked worker's alarm, driven
// directly with synthetic lateness samples.
#include "wake_advance.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

using namespace std::chrono_literals;
using urt::detail::wake_advance;

namespace {

// The fraction of `samples` earlier than `value`.
double fraction_below(const std::vector<std::chrono::nanoseconds>& samples,
                      std::chrono::nanoseconds value) {
  const auto n = std::count_if(samples.begin(), samples.end(), [&](auto s) { return s < value; });
  return static_cast<double>(n) / static_cast<double>(samples.size());
}

// Lateness like a VM's: a floor of 15 us, most within 15 us above it, a few
// long stalls (seeded, so every run sees the same samples).
std::vector<std::chrono::nanoseconds> vm_like(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> tail(1.0 / 8000.0);  // ns
  std::uniform_int_distribution<int> stall(0, 99);
  std::vector<std::chrono::nanoseconds> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto ns = std::chrono::nanoseconds{15000 + static_cast<std::int64_t>(tail(rng))};
    if (stall(rng) == 0) ns += 5ms;  // 1%: a host stall
    out.push_back(ns);
  }
  return out;
}

// Lets `a` learn from 20000 samples of vm_like(seed), then returns the
// fraction of 20000 further samples (unseen) that come earlier than it.
double learned_fraction_below(wake_advance& a, unsigned seed) {
  const auto samples = vm_like(40000, seed);
  for (std::size_t i = 0; i < 20000; ++i) a.observe(samples[i]);
  const std::vector<std::chrono::nanoseconds> rest(samples.begin() + 20000, samples.end());
  return fraction_below(rest, a.value());
}

}  // namespace

TEST_CASE("wake_advance: starts at 0 and settles within a step of a constant lateness") {
  wake_advance a;
  CHECK(a.value() == 0ns);
  for (int i = 0; i < 200; ++i) a.observe(20us);
  // 80 steps of 250 ns reach 20 us; from then on it stays there.
  CHECK(a.value() == 20us);
  a.observe(20us);
  CHECK(a.value() == 20us);
  a.observe(21us);
  CHECK(a.value() == 20us + wake_advance::default_step);
  a.observe(19us);
  CHECK(a.value() == 20us);
}

TEST_CASE("wake_advance: one long stall moves it by one step, not by its size") {
  wake_advance a;
  for (int i = 0; i < 200; ++i) a.observe(20us);
  a.observe(8ms);
  CHECK(a.value() == 20us + wake_advance::default_step);
  a.observe(20us);
  CHECK(a.value() == 20us);
}

TEST_CASE("wake_advance: bounded by max above and by 0 below") {
  wake_advance a(30us, 1us, 1us);
  for (int i = 0; i < 1000; ++i) a.observe(5ms);
  CHECK(a.value() == 30us);
  for (int i = 0; i < 1000; ++i) a.observe(-3us);  // taken as earlier than any advance
  CHECK(a.value() == 0ns);
  a.observe(0ns);
  CHECK(a.value() == 0ns);
}

TEST_CASE("wake_advance: settles at the median of a VM-like lateness") {
  wake_advance a;
  // Judged on samples it has not seen: about half come earlier.
  const double below = learned_fraction_below(a, 7);
  CAPTURE(a.value().count());
  CHECK(below > 0.40);
  CHECK(below < 0.60);
  // The stalls (1% at +5 ms) did not drag it up: it stays near the body.
  CHECK(a.value() > 15us);
  CHECK(a.value() < 30us);
}

TEST_CASE("wake_advance: unequal steps track a lower quantile") {
  // Up 1, down 3: settles where a quarter of the samples are earlier.
  wake_advance a(100us, 100ns, 300ns);
  const double below = learned_fraction_below(a, 11);
  CAPTURE(a.value().count());
  CHECK(below > 0.15);
  CHECK(below < 0.35);
}
