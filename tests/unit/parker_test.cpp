// Tests of a worker's idling (runtime/parker.*), driven on the test thread
// with its own io_context: what ends a wait, that a release is never run
// early (the spin to it), and what the parker counts. No assertion on how
// long anything took: only on order ("not before the release") and counts.
#include <doctest/doctest.h>

#include <asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "parker.hpp"
#include "worker_counters.hpp"

using urt::detail::parker;
using urt::detail::worker_counters;

namespace {

// Where the parker waits: in its io_context (as with I/O outstanding) or
// on the doorbell's futex (none).
enum class channel { reactor, futex };

struct bench_parker {
  explicit bench_parker(parker::config cfg, channel ch = channel::futex)
      : p(io, lease, cfg, counters), io_outstanding(ch == channel::reactor) {
    p.arm();
  }
  ~bench_parker() {
    p.disarm();
    io.poll();
  }
  bench_parker(const bench_parker&) = delete;
  bench_parker& operator=(const bench_parker&) = delete;

  // Waits with nothing pending and the state unchanged.
  void idle(urt::clock::time_point release, urt::clock::time_point token_check = urt::clock::time_point::max()) {
    const auto nothing = [] { return false; };
    const auto outstanding = [this] { return io_outstanding; };
    p.idle(release, token_check, parker::wake_checks{nothing, nothing, outstanding});
  }
  std::uint64_t get(const std::atomic<std::uint64_t>& c) const { return c.load(); }

  asio::io_context io{1};
  urt::detail::io_lease lease;
  worker_counters counters;
  parker p;
  bool io_outstanding;
};

constexpr channel channels[] = {channel::reactor, channel::futex};

parker::config at_release() {
  return {.idle_spin = std::chrono::nanoseconds{0},
          .idle_spin_policy = urt::spin_policy::fixed,
          .timer_spin = std::chrono::nanoseconds{0},
          .timer_wake = urt::timer_wake_mode::at_release};
}

// How far ahead the deadlines of the tests below lie: long enough that the
// test thread reaches the park before them even when a loaded machine (CI,
// TSan) keeps it off its CPU for a while (its cases also run alone:
// tests/CMakeLists.txt).
constexpr std::chrono::milliseconds reach_the_park{100};

}  // namespace

TEST_CASE("parker: work already visible ends the wait before parking") {
  for (const auto spin : {std::chrono::nanoseconds{0}, std::chrono::nanoseconds{50'000}}) {
    CAPTURE(spin.count());
    auto cfg = at_release();
    cfg.idle_spin = spin;
    bench_parker b(cfg);
    const auto pending = [] { return true; };
    const auto unchanged = [] { return false; };
    b.p.idle(urt::clock::time_point::max(), urt::clock::time_point::max(),
             parker::wake_checks{pending, unchanged, unchanged});
    CHECK(b.get(b.counters.parks) == 0);
    // A state change ends it the same way.
    b.p.idle(urt::clock::time_point::max(), urt::clock::time_point::max(),
             parker::wake_checks{unchanged, pending, unchanged});
    CHECK(b.get(b.counters.parks) == 0);
  }
}

TEST_CASE("parker: parked for a release, it wakes by the alarm and never before the release") {
  for (const channel ch : channels) {
    CAPTURE(static_cast<int>(ch));
    bench_parker b(at_release(), ch);
    for (int round = 1; round <= 3; ++round) {
      // Far enough ahead: under TSan on a loaded 2-CPU machine, 300 us
      // passed once before the parker reached its park (CI), and a release
      // already due is rightly not parked for.
      const auto release = urt::clock::now() + reach_the_park;
      b.idle(release);
      CHECK(urt::clock::now() >= release);
      CHECK(b.get(b.counters.parks) == static_cast<std::uint64_t>(round));
      CHECK(b.p.rings_received() == 0);
    }
  }
}

TEST_CASE("parker: timer_spin wakes early and spins to the release instead of parking") {
  auto cfg = at_release();
  // An advance longer than the wait: it never parks, and spins the whole
  // wait (long enough that even a loaded machine runs it before the
  // release, so some of it is spun).
  cfg.timer_spin = std::chrono::seconds{1};
  bench_parker b(cfg);
  const auto release = urt::clock::now() + reach_the_park;
  b.idle(release);
  CHECK(urt::clock::now() >= release);
  CHECK(b.get(b.counters.parks) == 0);
  CHECK(b.get(b.counters.timer_spin_ns) > 0);
  CHECK(b.p.reported_timer_advance() == cfg.timer_spin);
}

TEST_CASE("parker: a state change ends the spin to a release at once") {
  auto cfg = at_release();
  cfg.timer_spin = std::chrono::seconds{1};  // the most: it spins the whole wait
  bench_parker b(cfg);
  const auto nothing = [] { return false; };
  const auto stopping = [] { return true; };  // stop() began
  const auto release = urt::clock::now() + std::chrono::milliseconds{900};
  b.p.idle(release, urt::clock::time_point::max(), parker::wake_checks{nothing, stopping, nothing});
  CHECK(urt::clock::now() < release);  // it did not spin to the release
  CHECK(b.get(b.counters.parks) == 0);
}

TEST_CASE("parker: a token deadline ends the park with no spin when no release is due") {
  for (const channel ch : channels) {
    CAPTURE(static_cast<int>(ch));
    bench_parker b(at_release(), ch);
    const auto check_at = urt::clock::now() + reach_the_park;
    b.idle(urt::clock::time_point::max(), check_at);
    CHECK(urt::clock::now() >= check_at);
    CHECK(b.get(b.counters.parks) == 1);
    CHECK(b.get(b.counters.timer_spin_ns) == 0);
  }
}

TEST_CASE("parker: a ring from another thread ends the park and an awake parker is not rung") {
  for (const channel ch : channels) {
    CAPTURE(static_cast<int>(ch));
    bench_parker b(at_release(), ch);
    CHECK_FALSE(b.p.ring());  // not parking: no doorbell write
    std::atomic<bool> woke{false};
    std::thread ringer([&] {
      // Ring once it parks (parking() may be seen early: then the ring is
      // seen by its re-check, and it does not park at all).
      while (!woke.load()) {
        if (b.p.parking() && b.p.ring()) return;
        std::this_thread::yield();
      }
    });
    b.idle(urt::clock::time_point::max());
    woke.store(true);
    ringer.join();
    CHECK(b.get(b.counters.parks) == 1);
    CHECK(b.p.rings_received() == 1);
  }
}

TEST_CASE("parker: I/O that becomes outstanding after the futex was chosen sends it round") {
  bench_parker b(at_release());
  // The first look chooses the futex; the re-check after the announcement
  // sees I/O outstanding (an executor's count left 0 meanwhile) and
  // returns without parking, so the worker's next idle waits in its
  // reactor, where the completion can reach it.
  int looks = 0;
  const auto nothing = [] { return false; };
  const auto io = [&looks] { return ++looks > 1; };
  b.p.idle(urt::clock::time_point::max(), urt::clock::time_point::max(),
           parker::wake_checks{nothing, nothing, io});
  CHECK(looks == 2);
  CHECK(b.get(b.counters.parks) == 0);
}

TEST_CASE("parker: a release within the advance of the clock's start does not wrap") {
  auto cfg = at_release();
  cfg.timer_spin = std::chrono::milliseconds{1};
  bench_parker b(cfg);
  b.idle(urt::clock::time_point::min());  // long past: returns at once
  CHECK(b.get(b.counters.parks) == 0);
}
