// Tests of the doorbell (runtime/doorbell.*): its eventfd channel (an
// owner parked in its reactor) and its futex channel (an owner with no I/O).
#include <doctest/doctest.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "doorbell.hpp"
#include "wakeup_fd.hpp"

using urt::detail::doorbell;
using urt::detail::wakeup_fd;

TEST_CASE("doorbell: an awake owner is never rung") {
  asio::io_context io{1};
  doorbell bell(io);
  bell.arm();
  for (int i = 0; i < 100; ++i) CHECK_FALSE(bell.ring());  // no syscall
  CHECK(io.poll() == 0);                                   // nothing was written
  CHECK(bell.received() == 0);
  bell.disarm();
  io.poll();
}

TEST_CASE("doorbell: exactly one ringer pays per parking episode") {
  asio::io_context io{1};
  doorbell bell(io);
  bell.arm();
  bell.announce_parking(doorbell::channel::reactor);
  CHECK(bell.ring());
  CHECK_FALSE(bell.ring());  // the flag was exchanged away
  CHECK(io.run_one() == 1);  // the wait completed: the owner would wake
  CHECK(bell.received() == 1);
  bell.cancel_parking();
  CHECK_FALSE(bell.ring());
  bell.disarm();
  io.poll();
}

TEST_CASE("doorbell: a parked owner thread is woken by a ring from another thread") {
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);
  doorbell bell(io);
  bell.arm();
  std::atomic<int> woken{0};
  for (int round = 1; round <= 50; ++round) {
    bell.rearm();
    bell.announce_parking(doorbell::channel::reactor);
    std::thread ringer([&] {
      while (!bell.ring()) {
      }
    });
    io.run_one();  // blocks until the ring arrives
    bell.cancel_parking();
    ringer.join();
    woken.fetch_add(1);
    CHECK(bell.received() == static_cast<std::uint64_t>(round));
  }
  CHECK(woken.load() == 50);
  bell.disarm();
  guard.reset();
  io.poll();
}

TEST_CASE("doorbell: a wake-up makes no system call and rearm drains old rings") {
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);  // as the worker holds: no stop at zero work
  doorbell bell(io);
  bell.arm();
  bell.announce_parking(doorbell::channel::reactor);
  CHECK(bell.ring());
  CHECK(io.run_one() == 1);  // woken: the handler only noted the completion
  bell.cancel_parking();
  CHECK(bell.received() == 1);
  // A stale parked flag lets a late ringer write once more while the owner
  // is awake; rearm() drains both writes, so the new wait stays pending.
  bell.announce_parking(doorbell::channel::reactor);
  bell.cancel_parking();
  bell.announce_parking(doorbell::channel::reactor);
  CHECK(bell.ring());
  bell.cancel_parking();
  bell.rearm();
  CHECK(io.poll() == 0);
  CHECK(bell.received() == 1);
  // rearm() while a wait is pending changes nothing.
  bell.rearm();
  bell.announce_parking(doorbell::channel::reactor);
  CHECK(bell.ring());
  CHECK(io.run_one() == 1);
  bell.cancel_parking();
  CHECK(bell.received() == 2);
  bell.disarm();
  guard.reset();
  io.poll();
}

TEST_CASE("doorbell: a futex-parked owner thread is woken by a ring from another thread") {
  asio::io_context io{1};
  doorbell bell(io);
  for (int round = 1; round <= 50; ++round) {
    bell.announce_parking(doorbell::channel::futex);
    std::thread ringer([&] {
      while (!bell.ring()) {
      }
    });
    CHECK(bell.wait(urt::clock::time_point::max()));  // blocks until the ring
    bell.cancel_parking();
    ringer.join();
    CHECK(bell.received() == static_cast<std::uint64_t>(round));
  }
  CHECK(io.poll() == 0);  // the eventfd was never written
}

TEST_CASE("doorbell: on the futex, a ring before the wait is not lost, and a deadline ends it") {
  asio::io_context io{1};
  doorbell bell(io);
  // Rung between the announcement (and re-check) and the wait: the wait
  // sees the word changed and returns at once, as rung.
  bell.announce_parking(doorbell::channel::futex);
  CHECK(bell.ring());
  CHECK_FALSE(bell.ring());  // exactly one ringer pays
  CHECK(bell.wait(urt::clock::time_point::max()));
  CHECK(bell.received() == 1);
  bell.cancel_parking();
  // Not rung: the absolute deadline ends it, and it says so.
  bell.announce_parking(doorbell::channel::futex);
  const auto until = urt::clock::now() + std::chrono::milliseconds{2};
  CHECK_FALSE(bell.wait(until));
  CHECK(urt::clock::now() >= until);
  CHECK(bell.parking());  // still announced: the owner cancels it
  bell.cancel_parking();
  CHECK_FALSE(bell.parking());
  CHECK_FALSE(bell.ring());
  CHECK(bell.received() == 1);
  // A deadline already past returns at once; one at the clock's start
  // does not wrap.
  bell.announce_parking(doorbell::channel::futex);
  CHECK_FALSE(bell.wait(urt::clock::time_point::min()));
  bell.cancel_parking();
}

TEST_CASE("doorbell: a rung owner reads as parking but not asleep until it runs") {
  asio::io_context io{1};
  doorbell bell(io);
  CHECK_FALSE(bell.parking());
  CHECK_FALSE(bell.asleep());
  for (const auto ch : {doorbell::channel::futex, doorbell::channel::reactor}) {
    bell.arm();
    bell.announce_parking(ch);
    CHECK(bell.parking());
    CHECK(bell.asleep());
    CHECK(bell.ring());
    // Being woken: placement must not take it for awake, nor for asleep.
    CHECK(bell.parking());
    CHECK_FALSE(bell.asleep());
    CHECK_FALSE(bell.ring());  // rung already: nobody pays twice
    bell.cancel_parking();     // the owner runs
    CHECK_FALSE(bell.parking());
    CHECK_FALSE(bell.asleep());
    bell.disarm();
    io.poll();
    io.restart();
  }
}

TEST_CASE("wakeup_fd: a write between drain() and arm() completes the new wait") {
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  REQUIRE(fd >= 0);
  wakeup_fd w(io, fd);
  const std::uint64_t one = 1;
  REQUIRE(::write(fd, &one, sizeof one) == sizeof one);
  w.arm();
  CHECK(w.waiting());
  CHECK(io.poll() == 1);
  CHECK_FALSE(w.waiting());
  CHECK(w.completions() == 1);
  CHECK(w.drain() == 1);
  CHECK(w.drain() == 0);  // EAGAIN: nothing left
  REQUIRE(::write(fd, &one, sizeof one) == sizeof one);  // the racing ring
  w.arm();
  CHECK(io.poll() == 1);  // not lost
  CHECK(w.completions() == 2);
  w.disarm();
  guard.reset();
  io.poll();
}
