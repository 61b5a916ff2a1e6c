// Tests of the reschedule requests inside running runtimes (runtime/resched.*,
// worker::serve_resched): an urgent remote spawn queued on a worker that runs
// a less urgent task runs on the other worker as soon as that one reaches a
// scheduling point below it, at a step or at a preemption point, while the
// first worker's task still runs. Neither worker ever idles, so the stranded
// watch (an idle worker's take-over) cannot be what moves it. Decided by
// which worker ran the task and whether the first one was still held, never
// by time.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <thread>

#include "../topologies.hpp"
#include "urt/urt.hpp"

namespace {

using std::chrono::steady_clock;
constexpr auto patience = std::chrono::seconds{5};  // only a failing run waits this long

struct scene {
  std::atomic<bool> urgent_ran{false};
  std::atomic<unsigned> urgent_worker{~0U};
  std::atomic<bool> held_until_urgent{false};  // worker 0's task saw the urgent one run
  std::latch held{1};
  std::latch hold_ended{1};

  // Worker 0 runs a task at priority 1 that reaches no scheduling point
  // until the urgent task ran (or `patience` passed: the failure).
  void hold_worker_0(urt::runtime& rt) {
    rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, [this] {
      held.count_down();
      const auto until = steady_clock::now() + patience;
      while (!urgent_ran.load() && steady_clock::now() < until) std::this_thread::yield();
      held_until_urgent.store(urgent_ran.load());
      hold_ended.count_down();
    });
    held.wait();
  }
  // Waits for worker 0's task to end before the stop: stop() drains, and a
  // draining runtime leaves each inbox to its owner.
  void wait_and_stop(urt::runtime& rt) {
    hold_ended.wait();
    rt.stop();
  }
  void spawn_urgent(urt::runtime& rt) {
    rt.spawn({.priority = 90}, [this] {
      urgent_worker.store(urt::this_task::worker_id());
      urgent_ran.store(true);
    });
  }
};

// Worker 1 steps from task to task at priority 2: each task spawns the next
// until the urgent task ran.
void keep_stepping(urt::runtime& rt, scene& s, const steady_clock::time_point until) {
  rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, [&rt, &s, until] {
    if (!s.urgent_ran.load() && steady_clock::now() < until) keep_stepping(rt, s, until);
  });
}

}  // namespace

TEST_CASE("resched: an urgent spawn behind a running task runs on the worker that steps first") {
  urt::runtime rt(urt_test::synthetic_workers(urt_test::flat_n(2)));
  scene s;
  s.hold_worker_0(rt);
  std::latch stepping(1);
  rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, [&] { stepping.count_down(); });
  keep_stepping(rt, s, steady_clock::now() + patience);
  stepping.wait();
  // Worker 0 shows level 1, worker 1 level 2: the placement queues the
  // urgent task on worker 0, whose task runs on.
  s.spawn_urgent(rt);
  s.wait_and_stop(rt);
  CHECK(s.urgent_worker.load() == 1);
  CHECK(s.held_until_urgent.load());
}

TEST_CASE("resched: a less urgent task's preemption point takes the urgent spawn over") {
  urt::runtime rt(urt_test::synthetic_workers(urt_test::flat_n(2)));
  scene s;
  s.hold_worker_0(rt);
  std::latch running(1);
  std::atomic<bool> yielded{false};
  // Worker 1 runs one long task at priority 2 that reaches a preemption
  // point in every round and returns when one says a more urgent task waits.
  rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, [&] {
    running.count_down();
    const auto until = steady_clock::now() + patience;
    while (steady_clock::now() < until) {
      if (urt::preempt_point()) {
        yielded.store(true);
        return;
      }
    }
  });
  running.wait();
  s.spawn_urgent(rt);
  s.wait_and_stop(rt);
  CHECK(yielded.load());
  CHECK(s.urgent_worker.load() == 1);
  CHECK(s.held_until_urgent.load());
}

TEST_CASE("resched: a task pinned to the held worker stays there") {
  // No request is raised for a task only worker 0 may run (and a pull could
  // not move it): it runs on worker 0 once its task ends, and worker 1 goes
  // on with its own work.
  urt::runtime rt(urt_test::synthetic_workers(urt_test::flat_n(2)));
  scene s;
  std::atomic<bool> release{false};
  std::latch held(1);
  rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, [&] {
    held.count_down();
    while (!release.load()) std::this_thread::yield();
  });
  held.wait();
  std::atomic<unsigned> filler_runs{0};
  std::atomic<bool> urgent_ran{false};
  std::atomic<unsigned> urgent_worker{~0U};
  const auto until = steady_clock::now() + patience;
  // Worker 1 steps at priority 2 until the urgent task ran.
  std::function<void()> next = [&] {
    filler_runs.fetch_add(1);
    if (filler_runs.load() == 1000) release.store(true);  // worker 0's task ends
    if (!urgent_ran.load() && steady_clock::now() < until) {
      rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, next);
    }
  };
  rt.spawn({.priority = 90, .affinity = urt::worker_set{0}}, [&] {
    urgent_worker.store(urt::this_task::worker_id());
    urgent_ran.store(true);
  });
  rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, next);
  rt.stop();
  CHECK(urgent_ran.load());
  CHECK(urgent_worker.load() == 0);
  CHECK(filler_runs.load() >= 1000);
}
