// idle_window: the adapted idle spin, driven directly with synthetic idle
// periods.
#include "idle_window.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace std::chrono_literals;
using urt::detail::idle_window;

TEST_CASE("idle_window: starts at the maximum, so a start-up burst is spun for") {
  const idle_window w(50us);
  CHECK(w.value() == 50us);
}

TEST_CASE("idle_window: only the alarm waking it: halves down to 0 and stays there") {
  idle_window w(50us, 2us);
  w.alarm_after_park();
  CHECK(w.value() == 25us);
  w.alarm_after_park();
  CHECK(w.value() == 12500ns);
  w.alarm_after_park();
  CHECK(w.value() == 6250ns);
  w.alarm_after_park();
  CHECK(w.value() == 3125ns);
  w.alarm_after_park();  // 1562 ns is below the 2 us start: park at once
  CHECK(w.value() == 0ns);
  w.alarm_after_park();
  CHECK(w.value() == 0ns);
}

TEST_CASE("idle_window: work arriving later than the maximum shrinks it like the alarm") {
  idle_window w(50us, 2us);
  w.work_after_park(2ms);
  CHECK(w.value() == 25us);
  w.work_after_park(51us);
  CHECK(w.value() == 12500ns);
}

TEST_CASE("idle_window: work that a longer spin would have caught grows it back, up to the maximum") {
  idle_window w(50us, 2us);
  for (int i = 0; i < 6; ++i) w.alarm_after_park();
  REQUIRE(w.value() == 0ns);
  w.work_after_park(30us);  // parked, and the work came 30 us after going idle
  CHECK(w.value() == 2us);
  w.work_after_park(30us);
  CHECK(w.value() == 4us);
  for (int i = 0; i < 4; ++i) w.work_after_park(50us);  // 8, 16, 32, then capped
  CHECK(w.value() == 50us);
  w.work_after_park(1us);
  CHECK(w.value() == 50us);
}

TEST_CASE("idle_window: a zero maximum never spins, and the start is kept within it") {
  idle_window none(0ns);
  none.work_after_park(0ns);
  CHECK(none.value() == 0ns);
  none.alarm_after_park();
  CHECK(none.value() == 0ns);

  idle_window small(1us, 2us);  // start above the maximum: clamped to it
  for (int i = 0; i < 3; ++i) small.alarm_after_park();
  REQUIRE(small.value() == 0ns);
  small.work_after_park(500ns);
  CHECK(small.value() == 1us);

  idle_window zero_start(10us, 0ns);  // a zero start would never grow: 1 ns instead
  for (int i = 0; i < 20; ++i) zero_start.alarm_after_park();
  REQUIRE(zero_start.value() == 0ns);
  zero_start.work_after_park(5us);
  CHECK(zero_start.value() == 1ns);
}
