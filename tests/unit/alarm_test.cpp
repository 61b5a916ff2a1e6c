// Tests of the timerfd alarm (runtime/alarm.*).
#include <doctest/doctest.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <chrono>
#include <cstdint>

#include "alarm.hpp"

TEST_CASE("alarm: fires once per set, never again until set anew") {
  using clock = std::chrono::steady_clock;
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);
  urt::detail::alarm alarm(io);
  for (int round = 1; round <= 3; ++round) {
    const auto at = clock::now() + std::chrono::microseconds{200};
    alarm.set(at);
    alarm.set(at);  // unchanged and pending: nothing to do
    CHECK(io.run_one() == 1);  // blocks until the expiry
    CHECK(clock::now() >= at);
    CHECK(alarm.fired() == static_cast<std::uint64_t>(round));
    // Fired and not set again: no wait is pending, nothing completes.
    CHECK(io.poll() == 0);
  }
  // A deadline already passed fires at once; setting the same deadline
  // again after it fired arms it again (the timerfd is one-shot).
  const auto past = clock::now() - std::chrono::milliseconds{1};
  alarm.set(past);
  CHECK(io.run_one() == 1);
  alarm.set(past);
  CHECK(io.run_one() == 1);
  CHECK(alarm.fired() == 5);
  // Re-set before it fires: only the new deadline completes the wait.
  alarm.set(clock::now() + std::chrono::hours{1});
  alarm.set(clock::now() + std::chrono::microseconds{100});
  CHECK(io.run_one() == 1);
  CHECK(alarm.fired() == 6);
  CHECK(io.poll() == 0);
  alarm.disarm();
  guard.reset();
  io.poll();
}
