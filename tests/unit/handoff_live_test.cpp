// Tests of the remote hand-off inside running runtimes (runtime/inbox.hpp,
// worker::drain_inbox, worker::submit_local): an urgent remote spawn behind
// thousands of pending ones runs first, FIFO within a priority holds across
// remote and local spawns whose order the caller observed, and bursts from
// four threads run exactly once in every migration mode. Counted by order,
// never by time.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "../topologies.hpp"
#include "urt/urt.hpp"

TEST_CASE("handoff: an urgent remote spawn behind thousands of pending ones runs first") {
  urt::runtime rt(urt_test::synthetic_workers(1));
  urt_test::worker_0_hold h;
  h.occupy(rt);
  std::atomic<unsigned> next{0};
  std::atomic<unsigned> urgent_at{~0U};
  constexpr unsigned burst = 5000;
  for (unsigned i = 0; i < burst; ++i) {
    rt.spawn({.priority = 1}, [&] { next.fetch_add(1); });
  }
  rt.spawn({.priority = 90}, [&] { urgent_at.store(next.fetch_add(1)); });
  h.open();
  rt.stop();
  CHECK(urgent_at.load() == 0);
  CHECK(next.load() == burst + 1);
}

TEST_CASE("handoff: FIFO within a priority holds from remote spawns to a later local one") {
  // The outside thread's spawns at 20 return before it lets the running
  // task spawn at 20 itself: they run first, in order.
  urt::runtime rt(urt_test::synthetic_workers(1));
  std::atomic<bool> remote_done{false};
  std::mutex m;
  std::vector<int> order;
  std::latch started(1);
  rt.spawn({.priority = 99}, [&] {
    started.count_down();
    while (!remote_done.load()) std::this_thread::yield();
    rt.spawn({.priority = 20}, [&] {
      std::lock_guard lock(m);
      order.push_back(-1);  // the local spawn
    });
  });
  started.wait();
  constexpr int remote = 300;
  for (int i = 0; i < remote; ++i) {
    rt.spawn({.priority = 20}, [&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    });
  }
  remote_done.store(true);
  rt.stop();
  REQUIRE(order.size() == remote + 1);
  for (int i = 0; i < remote; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  CHECK(order.back() == -1);
}

TEST_CASE("handoff: bursts from four threads run exactly once in every migration mode") {
  for (const urt::migration_mode mode :
       {urt::migration_mode::push_ipi, urt::migration_mode::pull, urt::migration_mode::none}) {
    CAPTURE(static_cast<int>(mode));
    urt::runtime_options o = urt_test::synthetic_workers(urt_test::several_llcs);
    o.migration = mode;
    urt::runtime rt(o);
    constexpr unsigned threads = 4;
    constexpr unsigned bursts = 20;
    constexpr unsigned per_burst = 500;
    std::vector<std::atomic<std::uint8_t>> ran(threads * bursts * per_burst);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (unsigned b = 0; b < bursts; ++b) {
          for (unsigned i = 0; i < per_burst; ++i) {
            const unsigned id = (t * bursts + b) * per_burst + i;
            // Mostly bulk at 1..3, one urgent spawn at the end of each burst.
            const auto p = static_cast<urt::priority_t>(i + 1 == per_burst ? 90 : 1 + id % 3);
            rt.spawn({.priority = p}, [&ran, id] { ran[id].fetch_add(1); });
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    rt.stop();
    unsigned wrong = 0;
    for (auto& r : ran) wrong += r.load() == 1 ? 0 : 1;
    CHECK(wrong == 0);
    CHECK(rt.stats().total().completed == ran.size());
  }
}

TEST_CASE("handoff: no less urgent task is picked while a more urgent burst is walked into order") {
  // A level's burst comes out of its inbox stack newest first and is walked
  // into FIFO order a chunk per scheduling point (inbox.hpp). A task at 10
  // already in the run queue must not be picked while the 50s, whose
  // spawns all returned, are still being walked.
  urt::runtime rt(urt_test::synthetic_workers(1));
  std::atomic<unsigned> polls{0};
  std::atomic<bool> stop_polling{false};
  std::latch started(1);
  std::latch polling_stopped(1);
  std::atomic<bool> go{false};
  rt.spawn({.priority = 99}, [&] {
    started.count_down();
    // Its preemption points take the task at 10 into the run queue.
    while (!stop_polling.load()) {
      urt::preempt_point();
      polls.fetch_add(1);
    }
    polling_stopped.count_down();
    while (!go.load()) std::this_thread::yield();
  });
  started.wait();
  std::atomic<unsigned> next{0};
  std::atomic<unsigned> low_at{~0U};
  rt.spawn({.priority = 10}, [&] { low_at.store(next.fetch_add(1)); });
  // Two whole preemption points after the spawn returned: it was taken in.
  const unsigned seen = polls.load();
  while (polls.load() < seen + 2) std::this_thread::yield();
  stop_polling.store(true);
  polling_stopped.wait();
  // Far more than one walk chunk, so the step after the holder is in it.
  constexpr unsigned burst = 5000;
  for (unsigned i = 0; i < burst; ++i) rt.spawn({.priority = 50}, [&] { next.fetch_add(1); });
  go.store(true);
  // Not stop() at once: a stopping worker takes its whole inbox in one go.
  while (next.load() < burst + 1) std::this_thread::yield();
  rt.stop();
  CHECK(low_at.load() == burst);
  CHECK(next.load() == burst + 1);
}
