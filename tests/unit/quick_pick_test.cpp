// Tests of the quick pick (runtime/quick_pick.hpp): its table of when a
// worker may take the run queue's head without a full step, driven
// single-threaded; its streak limit; and a live worker taking quick picks
// that still runs an urgent remote spawn next and keeps FIFO within a
// priority across remote and local spawns.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "quick_pick.hpp"
#include "urt/urt.hpp"

using urt::detail::quick_pick;

namespace {

// A worker that ran a task at 10 and has another queued at 10, nothing else.
quick_pick::view plain() {
  quick_pick::view v;
  v.ran = 10;
  v.queue_top = 10;
  return v;
}

}  // namespace

TEST_CASE("quick_pick: the head at the level that ran, nothing else to do") {
  CHECK(quick_pick::allows(plain()));
  quick_pick::view v = plain();
  v.ran = v.queue_top = 0;  // the normal class too
  CHECK(quick_pick::allows(v));
}

TEST_CASE("quick_pick: the levels that need a full step") {
  struct row {
    const char* what;
    int ran, queue_top, inbox_top, inbox_walking;
    bool allowed;
  };
  const row rows[] = {
      {"nothing ran (the step before found nothing)", -1, 10, -1, -1, false},
      {"the queue is empty", 10, -1, -1, -1, false},
      {"a more urgent task queued (a raise to publish)", 10, 20, -1, -1, false},
      {"only less urgent tasks queued (a lowering)", 10, 5, -1, -1, false},
      {"a more urgent node in the inbox", 10, 10, 11, -1, false},
      {"inbox nodes at the same level: behind the queue's", 10, 10, 10, -1, true},
      {"inbox nodes below it", 10, 10, 3, -1, true},
      {"a more urgent level half walked", 10, 10, -1, 11, false},
      {"the same level half walked", 10, 10, -1, 10, true},
      {"a lower level half walked", 10, 10, -1, 2, true},
  };
  for (const row& r : rows) {
    CAPTURE(r.what);
    quick_pick::view v;
    v.ran = r.ran;
    v.queue_top = r.queue_top;
    v.inbox_top = r.inbox_top;
    v.inbox_walking = r.inbox_walking;
    CHECK(quick_pick::allows(v) == r.allowed);
  }
}

TEST_CASE("quick_pick: each pending duty of the step needs a full step") {
  struct row {
    const char* what;
    bool quick_pick::view::*flag;
  };
  const row rows[] = {
      {"a move took the top away", &quick_pick::view::lowered},
      {"FIFO work held back", &quick_pick::view::fifo_held},
      {"a budget would look", &quick_pick::view::budgets_look},
      {"new bandwidth parameters", &quick_pick::view::params_changed},
      {"timers queued or on their way", &quick_pick::view::timers},
      {"a reschedule request above the level", &quick_pick::view::resched_above},
      {"a token hop", &quick_pick::view::hop_pending},
      {"discards put off", &quick_pick::view::put_off},
  };
  for (const row& r : rows) {
    CAPTURE(r.what);
    quick_pick::view v = plain();
    v.*r.flag = true;
    CHECK_FALSE(quick_pick::allows(v));
  }
}

TEST_CASE("quick_pick: a full step at least every max_streak picks") {
  quick_pick q;
  for (unsigned i = 0; i < quick_pick::max_streak; ++i) {
    REQUIRE(q.may_try());
    q.taken();
  }
  CHECK_FALSE(q.may_try());
  CHECK(q.streak() == quick_pick::max_streak);
  q.full_step();
  CHECK(q.may_try());
  CHECK(q.streak() == 0);
}

TEST_CASE(
    "quick_pick: a worker taking quick picks runs an urgent remote spawn next and keeps FIFO") {
  // One worker. A parent at 10 queues 100 children at 10; they then run by
  // quick picks. While child 20 runs, another thread spawns an urgent task
  // at 90 (its spawn returns before child 20 ends): it runs right after
  // child 20. While child 40 runs, another thread spawns R at 10 and child
  // 40 then spawns L at 10: R's spawn returned first, so R runs before L,
  // both after child 99 (queued before either).
  urt::runtime_options o;
  o.cpus = "0";
  urt::runtime rt(o);
  std::mutex m;
  std::vector<int> order;
  std::atomic<int> logged{0};
  const auto log = [&](int what) {
    {
      const std::lock_guard lock(m);
      order.push_back(what);
    }
    logged.fetch_add(1);
    logged.notify_all();
  };
  constexpr int urgent = 1000;
  constexpr int remote = 2000;
  constexpr int local = 3000;
  const auto spawn_from_outside = [&](int priority, int what) {
    std::atomic<bool> returned{false};
    std::thread t([&] {
      rt.spawn({.priority = priority}, [&log, what] { log(what); });
      returned.store(true);
    });
    while (!returned.load()) std::this_thread::yield();
    t.join();
  };
  const urt::worker_stats before = rt.stats().total();
  rt.spawn({.priority = 10}, [&] {
    for (int i = 0; i < 100; ++i) {
      rt.spawn({.priority = 10}, [&, i] {
        log(i);
        if (i == 20) spawn_from_outside(90, urgent);
        if (i == 40) {
          spawn_from_outside(10, remote);
          rt.spawn({.priority = 10}, [&log] { log(local); });
        }
      });
    }
  });
  // Every task, the outside spawns included, before the stop: an outside
  // spawn backs out once stop() has begun.
  for (int n = logged.load(); n < 103; n = logged.load()) logged.wait(n);
  rt.stop();
  REQUIRE(order.size() == 103);
  std::vector<int> want;
  for (int i = 0; i <= 20; ++i) want.push_back(i);
  want.push_back(urgent);
  for (int i = 21; i < 100; ++i) want.push_back(i);
  want.push_back(remote);
  want.push_back(local);
  CHECK(order == want);
  // The path under test was taken (most children follow a child).
  CHECK(rt.stats().total().quick_picks - before.quick_picks >= 50);
}
