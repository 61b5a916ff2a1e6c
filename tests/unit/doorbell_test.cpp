// Tests of the eventfd doorbell (runtime/doorbell.*).
#include <doctest/doctest.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <thread>

#include "doorbell.hpp"

using urt::detail::doorbell;

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
  bell.announce_parking();
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
    bell.announce_parking();
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
