// Tests of a worker's FIFO budget (runtime/bandwidth.*), driven with
// made-up time points: a simulated worker picks tasks as worker::step()
// does, and the tests check the shares each class gets over many periods,
// the hold and its end, overrun accounting and that the totals reconcile.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "bandwidth.hpp"

using urt::bandwidth_options;
using urt::throttle_mode;
using urt::detail::bandwidth;
using urt::detail::run_class;
using namespace std::chrono_literals;

namespace {

using tp = urt::clock::time_point;
const tp t0 = tp{} + 1h;

// One worker that always has FIFO work and, when `normal` says so, normal
// work; every task runs `slice`. Returns the time each class ran.
struct simulation {
  bandwidth bw;
  tp now = t0;
  std::chrono::nanoseconds fifo{0}, normal{0}, idle{0};
  int looks = 0;  // scheduling points that read the clock

  explicit simulation(bandwidth_options o) : bw(o, t0) {}

  // One scheduling point as worker::step() takes it: look only where the
  // budget may change the pick, pick, then run the pick for `slice`.
  void step(bool fifo_waiting, bool normal_waiting, std::chrono::nanoseconds slice) {
    const run_class next = fifo_waiting     ? run_class::fifo
                           : normal_waiting ? run_class::normal
                                            : run_class::idle;
    run_class pick = next;
    if (bw.must_look(next, normal_waiting)) {
      ++looks;
      bw.tick(now);
      if (bw.decide(now, normal_waiting) == bandwidth::allow::normal_only) {
        pick = normal_waiting ? run_class::normal : run_class::idle;
      }
      bw.picked(pick);
    }
    (pick == run_class::fifo ? fifo : pick == run_class::normal ? normal : idle) += slice;
    now += slice;
  }
};

std::uint64_t get(const std::atomic<std::uint64_t>& c) { return c.load(); }

}  // namespace

TEST_CASE("bandwidth: deferred gives starving normal work its share of every period") {
  simulation s({.mode = throttle_mode::deferred, .runtime = 9500us, .period = 10ms});
  // Ten periods in windows of one: normal gets >= 0.5 ms of each 10 ms.
  for (int period = 0; period < 10; ++period) {
    const auto normal_before = s.normal;
    while (s.now < t0 + (period + 1) * 10ms) s.step(true, true, 100us);
    CAPTURE(period);
    CHECK(s.normal - normal_before >= 500us);
    CHECK(s.normal - normal_before <= 600us);  // the hold ends with the period
  }
  s.bw.tick(s.now);  // the last period's hold is accounted once its end is seen
  CHECK(get(s.bw.stats().throttle_events) == 10);
  CHECK(get(s.bw.stats().server_slices) == 50);  // 0.5 ms of 100 us slices per period
  CHECK(get(s.bw.stats().throttled_ns) == 10 * 500'000);
  CHECK(get(s.bw.stats().overrun_events) == 0);  // slices divide the budget exactly
}

TEST_CASE("bandwidth: deferred with no normal work never holds FIFO back, nor reads the clock") {
  simulation s({.mode = throttle_mode::deferred, .runtime = 9500us, .period = 10ms});
  while (s.now < t0 + 100ms) s.step(true, false, 100us);
  CHECK(s.fifo == 100ms);
  CHECK(s.looks == 1);  // only the first point, where the class changed from idle
  CHECK(get(s.bw.stats().throttle_events) == 0);
  CHECK(get(s.bw.stats().throttled_ns) == 0);
}

TEST_CASE("bandwidth: strict holds FIFO back at exhaustion even with nothing else to run") {
  simulation s({.mode = throttle_mode::strict, .runtime = 9500us, .period = 10ms});
  while (s.now < t0 + 100ms) s.step(true, false, 100us);
  s.bw.tick(s.now);
  CHECK(s.fifo == 95ms);
  CHECK(s.idle == 5ms);
  CHECK(get(s.bw.stats().throttle_events) == 10);
  CHECK(get(s.bw.stats().idle_ns) == 5'000'000);
}

TEST_CASE("bandwidth: in deferred mode the hold ends when normal work runs out") {
  simulation s({.mode = throttle_mode::deferred, .runtime = 9500us, .period = 10ms});
  while (s.now < t0 + 9500us) s.step(true, false, 100us);
  s.step(true, true, 100us);  // exhausted, normal waits: it runs
  CHECK(s.bw.holding());
  s.step(true, false, 100us);  // normal ran out: FIFO resumes inside the period
  CHECK_FALSE(s.bw.holding());
  CHECK(s.fifo == 9600us);
  CHECK(get(s.bw.stats().throttled_ns) == 100'000);
}

TEST_CASE("bandwidth: a task picked inside the budget that runs past it is counted as overrun") {
  bandwidth bw({.mode = throttle_mode::deferred, .runtime = 1ms, .period = 10ms}, t0);
  bw.tick(t0);
  CHECK(bw.decide(t0, true) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 3ms);  // ran 3 ms on a 1 ms budget
  CHECK(get(bw.stats().overrun_events) == 1);
  CHECK(get(bw.stats().overrun_ns) == 2'000'000);
  CHECK(bw.decide(t0 + 3ms, true) == bandwidth::allow::normal_only);
  bw.picked(run_class::normal);
  // A FIFO pick after exhaustion (no normal work: deferred lets it run) is
  // not an overrun.
  bw.tick(t0 + 4ms);
  CHECK(bw.decide(t0 + 4ms, false) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 5ms);
  CHECK(get(bw.stats().overrun_events) == 1);
}

TEST_CASE("bandwidth: a long idle or a long task rolls over many periods at once") {
  bandwidth bw({.mode = throttle_mode::strict, .runtime = 1ms, .period = 10ms}, t0);
  bw.tick(t0);
  bw.decide(t0, false);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 2ms);
  CHECK(bw.decide(t0 + 2ms, false) == bandwidth::allow::normal_only);  // strict: held
  bw.picked(run_class::idle);
  bw.tick(t0 + 10s + 3ms);  // idle for a thousand periods
  CHECK(bw.period_end() == t0 + 10s + 10ms);
  CHECK(bw.fifo_used() == 0ns);
  CHECK(bw.decide(t0 + 10s + 3ms, false) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 20s + 5ms);  // a task spanning periods: only the new period's part counts
  CHECK(bw.fifo_used() == 5ms);
  CHECK(bw.period_end() == t0 + 20s + 10ms);
}

TEST_CASE("bandwidth: FIFO, normal and idle time add up to the time accounted") {
  for (const auto mode : {throttle_mode::deferred, throttle_mode::strict}) {
    CAPTURE(static_cast<int>(mode));
    simulation s({.mode = mode, .runtime = 3ms, .period = 7ms});
    std::uint32_t x = 12345;
    for (int i = 0; i < 20000; ++i) {
      x = x * 1664525u + 1013904223u;  // a fixed pseudo-random mix of loads
      s.step((x >> 8) % 3 != 0, (x >> 12) % 2 == 0, std::chrono::microseconds{1 + (x >> 16) % 900});
    }
    s.bw.tick(s.now);
    const auto& c = s.bw.stats();
    CHECK(get(c.fifo_ns) == static_cast<std::uint64_t>(s.fifo.count()));
    CHECK(get(c.normal_ns) == static_cast<std::uint64_t>(s.normal.count()));
    CHECK(get(c.idle_ns) == static_cast<std::uint64_t>(s.idle.count()));
    CHECK(get(c.fifo_ns) + get(c.normal_ns) + get(c.idle_ns) ==
          static_cast<std::uint64_t>((s.now - t0).count()));
  }
}

TEST_CASE("bandwidth: overrun is carried into the next period as used FIFO time") {
  bandwidth bw({.mode = throttle_mode::deferred, .runtime = 2ms, .period = 10ms}, t0);
  bw.tick(t0);
  CHECK(bw.decide(t0, true) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 3ms);  // 1 ms past the budget
  CHECK(bw.decide(t0 + 3ms, true) == bandwidth::allow::normal_only);
  bw.picked(run_class::normal);
  bw.tick(t0 + 10ms);  // the next period starts with the 1 ms debt
  CHECK(bw.fifo_used() == 1ms);
  CHECK(bw.decide(t0 + 10ms, true) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 11ms);  // 1 ms of FIFO, with the debt: the 2 ms budget is spent
  CHECK(bw.decide(t0 + 11ms, true) == bandwidth::allow::normal_only);
  bw.picked(run_class::idle);
  bw.tick(t0 + 40ms);  // whole periods without FIFO: the debt is forgiven
  CHECK(bw.fifo_used() == 0ms);
}

TEST_CASE("bandwidth: a FIFO task running past the budget and the period's end pays the excess") {
  bandwidth bw({.mode = throttle_mode::deferred, .runtime = 9500us, .period = 10ms}, t0);
  bw.tick(t0);
  CHECK(bw.decide(t0, true) == bandwidth::allow::any);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 8ms);
  CHECK(bw.decide(t0 + 8ms, true) == bandwidth::allow::any);  // 1.5 ms of budget left
  bw.picked(run_class::fifo);
  // It runs 2.5 ms, across the period's end: 0.5 ms past the old period's
  // budget (overrun, and the new period's debt), 0.5 ms into the new one.
  bw.tick(t0 + 10500us);
  CHECK(get(bw.stats().overrun_events) == 1);
  CHECK(get(bw.stats().overrun_ns) == 500'000);
  CHECK(bw.fifo_used() == 1ms);
  CHECK(bw.period_end() == t0 + 20ms);
  CHECK(get(bw.stats().fifo_ns) == 10'500'000);
}

TEST_CASE("bandwidth: deferred gives normal work its share next to FIFO tasks crossing period ends") {
  // One worker that always has FIFO tasks of `fifo_slice` and normal tasks
  // of `normal_slice` waiting. A FIFO task picked just inside the budget
  // may run across the period's end; its time past the budget is a debt
  // the next period pays, so normal work gets (period - runtime) / period
  // on average, and over every window of 10 periods at least that less
  // one FIFO task (the cooperative bound: the window may end owing it).
  // Before the debt counted the part before the period's end, FIFO tasks
  // of 2 ms escaped every hold and left normal work nothing.
  constexpr auto period = 10ms;
  constexpr int periods = 200;
  for (const std::chrono::nanoseconds fifo_slice : {200us, 700us, 1300us, 2000us, 3300us, 9000us}) {
    for (const std::chrono::nanoseconds normal_slice : {100us, 300us}) {
      CAPTURE(fifo_slice.count());
      CAPTURE(normal_slice.count());
      bandwidth bw({.mode = throttle_mode::deferred, .runtime = 9500us, .period = period}, t0);
      std::vector<std::chrono::nanoseconds> normal(periods + 1, 0ns);  // per period, exactly
      tp now = t0;
      while (now < t0 + periods * period) {
        run_class pick = run_class::fifo;
        if (bw.must_look(run_class::fifo, true)) {
          bw.tick(now);
          if (bw.decide(now, true) == bandwidth::allow::normal_only) pick = run_class::normal;
          bw.picked(pick);
        }
        const std::chrono::nanoseconds d = pick == run_class::fifo ? fifo_slice : normal_slice;
        for (tp at = now; pick == run_class::normal && at < now + d;) {  // split at period ends
          const auto k = static_cast<std::size_t>((at - t0) / period);
          const tp end = std::min(now + d, t0 + static_cast<int>(k + 1) * period);
          if (k < normal.size()) normal[k] += end - at;
          at = end;
        }
        now += d;
      }
      std::chrono::nanoseconds all{0};
      for (int k = 0; k < periods; ++k) all += normal[static_cast<std::size_t>(k)];
      CHECK(all >= periods * 500us - fifo_slice);
      for (int k = 0; k + 10 <= periods; ++k) {
        std::chrono::nanoseconds window{0};
        for (int j = k; j < k + 10; ++j) window += normal[static_cast<std::size_t>(j)];
        CAPTURE(k);
        CHECK(window >= 10 * 500us - fifo_slice);
      }
    }
  }
}

TEST_CASE("bandwidth: a hold counts its time at each look, and release() ends it counted") {
  bandwidth bw({.mode = throttle_mode::strict, .runtime = 1ms, .period = 10ms}, t0);
  bw.picked(run_class::fifo);
  bw.tick(t0 + 1ms);
  REQUIRE(bw.decide(t0 + 1ms, false) == bandwidth::allow::normal_only);
  bw.picked(run_class::idle);
  bw.tick(t0 + 3ms);
  CHECK(bw.decide(t0 + 3ms, false) == bandwidth::allow::normal_only);
  CHECK(get(bw.stats().throttled_ns) == 2'000'000);  // a hold in progress shows
  CHECK(get(bw.stats().throttle_events) == 1);
  bw.release(t0 + 4ms);
  CHECK_FALSE(bw.holding());
  CHECK(get(bw.stats().throttled_ns) == 3'000'000);
  bw.release(t0 + 5ms);  // no hold: nothing more
  CHECK(get(bw.stats().throttled_ns) == 3'000'000);
}

TEST_CASE("bandwidth: has() matches the parameters it runs with, and a suspended budget none") {
  const bandwidth_options strict{.mode = throttle_mode::strict, .runtime = 1ms, .period = 10ms};
  bandwidth bw(strict, t0);
  CHECK(bw.has(strict));
  CHECK_FALSE(bw.has({.mode = throttle_mode::deferred, .runtime = 1ms, .period = 10ms}));
  CHECK_FALSE(bw.has({.mode = throttle_mode::strict, .runtime = 2ms, .period = 10ms}));
  CHECK_FALSE(bw.has({.mode = throttle_mode::strict, .runtime = 1ms, .period = 20ms}));
  bw.suspend(t0 + 1ms);
  CHECK_FALSE(bw.has(strict));  // given back, it must start afresh
  bw.configure(strict, t0 + 1s);
  CHECK(bw.has(strict));
  CHECK(get(bw.stats().idle_ns) == 1'000'000);  // up to the suspension only
}
