// Tests of dropping tasks unrun (runtime/worker.cpp: cancel_queued,
// end_periodic_series, discard): the dropped callable's destructor is user
// code, run on the worker; it may do what any code on a worker may, such as
// spawning, without deadlocking on the worker's own queue lock.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "urt/urt.hpp"

using namespace std::chrono_literals;

namespace {

// A capture whose destruction (not that of its moved-from copies) spawns a
// task on the runtime.
struct spawns_when_destroyed {
  urt::runtime* rt;
  std::atomic<int>* spawned;
  bool armed = true;
  spawns_when_destroyed(urt::runtime* r, std::atomic<int>* s) : rt(r), spawned(s) {}
  spawns_when_destroyed(spawns_when_destroyed&& o) noexcept
      : rt(o.rt), spawned(o.spawned), armed(std::exchange(o.armed, false)) {}
  spawns_when_destroyed(const spawns_when_destroyed&) = delete;
  spawns_when_destroyed& operator=(const spawns_when_destroyed&) = delete;
  spawns_when_destroyed& operator=(spawns_when_destroyed&&) = delete;
  ~spawns_when_destroyed() {
    if (!armed) return;
    rt->spawn({.priority = 5}, [] {});
    spawned->fetch_add(1);
  }
};

urt::runtime_options one_worker() {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("core:1 pu:1");
  o.idle_spin = 5us;
  return o;
}

}  // namespace

TEST_CASE("discard: a cancelled task whose destructor spawns does not deadlock its worker") {
  urt::runtime rt(one_worker());
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  std::atomic<int> spawned{0};
  rt.spawn({.priority = 50}, [&] {
    started = true;
    while (!release.load()) std::this_thread::yield();
  });
  while (!started.load()) std::this_thread::yield();
  // Queued behind the running task on the one worker: dropped by cancel.
  rt.spawn({.priority = 10}, [guard = spawns_when_destroyed(&rt, &spawned)] {});
  std::atomic<std::size_t> dropped{0};
  std::thread stopper([&] { dropped = rt.stop(urt::stop_mode::cancel); });
  // Let the stop begin before the running task ends, so that the queued
  // one is cancelled: an outside spawn is refused once it has begun. The
  // probes accepted before that queue up behind and are dropped as well.
  std::size_t probes = 0;
  for (;;) {
    try {
      rt.spawn({.priority = 1}, [] {});
      ++probes;
      std::this_thread::yield();
    } catch (const urt::runtime_stopped&) {
      break;
    }
  }
  release = true;
  stopper.join();
  CHECK(dropped.load() == 2 + probes);  // the task, its destructor's spawn, the probes
  CHECK(spawned.load() == 1);
  const urt::worker_stats s = rt.stats().total();
  CHECK(s.accepted == s.completed + s.cancelled);
}

TEST_CASE("discard: a periodic series ended by stop whose destructor spawns does not deadlock") {
  urt::runtime rt(one_worker());
  std::atomic<int> spawned{0};
  urt::periodic_task series = rt.every(
      1h, {.priority = 10}, [guard = spawns_when_destroyed(&rt, &spawned)] {},
      urt::clock::now() + 1h);
  rt.stop();  // drain: the pending series ends unrun, as one completed task
  CHECK(spawned.load() == 1);
  const urt::worker_stats s = rt.stats().total();
  CHECK(s.accepted == s.completed + s.cancelled);
}
