// clock_now(): urt::clock::now() for the runtime's own reads of the clock,
// as one clock_gettime(CLOCK_MONOTONIC) call (the vDSO: no system call);
// and saturating_add(), its deadlines' arithmetic.
//
// Why not clock::now(): libstdc++'s steady_clock::now() is a function in
// libstdc++.so that reaches clock_gettime through that library's PLT, one
// more page of code and one of data on the way. Warm, both cost the same;
// but a worker reads the clock first thing after its futex wait returns,
// when the TLB has lost those pages, and on the 2-core VM the first
// steady_clock::now() after 2 ms asleep took 4800-5900 cycles at the
// median against 1350-2000 for the first clock_gettime (bench/README.md,
// "urt-peers (b): the wake-up path's code, together").
//
// The same clock: libstdc++'s steady_clock is CLOCK_MONOTONIC, so a time
// point from clock_now() compares with one from urt::clock::now(), such as
// a deadline a user passed to spawn_at() (tests/unit/timer_test.cpp).
#pragma once

#include <time.h>

#include <chrono>
#include <type_traits>

#include "urt/timer.hpp"

namespace urt::detail {

static_assert(std::is_same_v<clock, std::chrono::steady_clock>,
              "clock_now() reads CLOCK_MONOTONIC, libstdc++'s steady_clock");

// t + d for d >= 0, saturating at time_point::max(): the runtime's
// deadlines a duration after a time point (a periodic release, a rescue's
// next look) never overflow; one past the clock's range is max(), which
// never comes.
inline clock::time_point saturating_add(clock::time_point t, clock::duration d) noexcept {
  return t > clock::time_point::max() - d ? clock::time_point::max() : t + d;
}

inline clock::time_point clock_now() noexcept {
  timespec ts{};
  // Cannot fail: CLOCK_MONOTONIC exists and `ts` is valid.
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return clock::time_point(std::chrono::duration_cast<clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

}  // namespace urt::detail
