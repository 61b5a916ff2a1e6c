// Tests of the reschedule requests inside running runtimes (runtime/resched.*,
// worker::serve_resched): an urgent remote spawn queued on a worker that runs
// a less urgent task runs on the other worker as soon as that one reaches a
// scheduling point below it, at a step or at a preemption point, while the
// first worker's task still runs. Neither worker ever idles there, so the
// stranded watch (an idle worker's take-over) cannot be what moves it. And
// an idle worker's wait ends on a request raised for a peer that was rung
// but is given no CPU. Decided by which worker ran the task and whether the
// first one was still held (or had run), never by time.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

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

// A runtime of two real workers on the first two CPUs this process may use
// (options.cpus); false, with a message, where there are fewer.
bool on_two_cpus(urt::runtime_options& o) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(::sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    MESSAGE("fewer than two CPUs allowed: not checked");
    return false;
  }
  o.cpus = std::to_string(cpus[0]) + "," + std::to_string(cpus[1]);
  return true;
}

// Pins the calling thread to `cpu` and makes it SCHED_FIFO 1, which no
// SCHED_OTHER worker there preempts; 0, or the error.
int fifo_on(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_param p{};
  p.sched_priority = 1;
  const int err = ::pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  return err != 0 ? err : ::pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
}

// Worker 1 steps from task to task at priority 2: each task spawns the next
// until the urgent task ran.
void keep_stepping(urt::runtime& rt, scene& s, const steady_clock::time_point until) {
  rt.spawn({.priority = 2, .affinity = urt::worker_set{1}}, [&rt, &s, until] {
    if (!s.urgent_ran.load() && steady_clock::now() < until) keep_stepping(rt, s, until);
  });
}

// Worker 1 of a two-worker runtime held off its CPU, as the OS does when
// another thread has it: the calling thread moves to worker 0's CPU (the
// spawner of urt-peers (e)), worker 1 parks (its first idle spin ends),
// then a SCHED_FIFO thread spins on worker 1's CPU until release() or
// `patience` (a failing run ends there, and worker 1 then runs). The
// kernel still runs a starved fair thread now and then (RT throttling, or
// the fair server from Linux 6.12): worker_1_ran() tells whether worker 1
// parked or took a ring since its CPU was taken.
class worker_1_held {
 public:
  explicit worker_1_held(urt::runtime& rt) : rt_(rt) {
    REQUIRE(::pthread_getaffinity_np(pthread_self(), sizeof(before_), &before_) == 0);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    CPU_SET(pu(0), &mine);
    REQUIRE(::pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine) == 0);
    while (rt.stats().workers[1].parks == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    hog_ = std::thread([this, cpu = pu(1)] {
      const int err = fifo_on(cpu);
      error_.store(err);
      started_.store(true);
      const auto until = steady_clock::now() + patience;
      while (err == 0 && !done_.load() && steady_clock::now() < until) {
      }
    });
    while (!started_.load()) std::this_thread::yield();
    woken_ = woken();
  }
  worker_1_held(const worker_1_held&) = delete;
  worker_1_held& operator=(const worker_1_held&) = delete;
  ~worker_1_held() { release(); }

  // SCHED_FIFO is not permitted here: nothing holds worker 1.
  [[nodiscard]] bool refused() const { return error_.load() != 0; }
  [[nodiscard]] bool worker_1_ran() const { return woken() != woken_; }
  // Ends the hold and gives the calling thread its CPUs back.
  void release() {
    done_.store(true);
    if (hog_.joinable()) hog_.join();
    if (pinned_) ::pthread_setaffinity_np(pthread_self(), sizeof(before_), &before_);
    pinned_ = false;
  }

 private:
  [[nodiscard]] int pu(unsigned w) const { return static_cast<int>(rt_.stats().workers[w].pu); }
  [[nodiscard]] std::uint64_t woken() const {
    const urt::worker_stats w = rt_.stats().workers[1];
    return w.parks + w.doorbells;
  }

  urt::runtime& rt_;
  cpu_set_t before_{};
  bool pinned_ = true;
  std::atomic<bool> done_{false};
  std::atomic<bool> started_{false};
  std::atomic<int> error_{0};
  std::uint64_t woken_ = 0;
  std::thread hog_;
};

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

TEST_CASE("resched: a task placed on a worker rung but given no CPU runs on an idle peer") {
  // Two real workers on two CPUs. A SCHED_FIFO thread takes worker 1's CPU
  // after worker 1 parked: a ring then wakes worker 1, but the OS does not
  // run it (urt-peers (e): a rung worker waited milliseconds for its CPU
  // while the other worker spun idle, then parked). Worker 0 runs a task of
  // its own before each urgent spawn from outside, so it is awake (still
  // showing that task's level, or spinning idle), and the urgent task must
  // run on it. The kernel runs a starved fair thread now and then (RT
  // throttling, or the fair server from Linux 6.12, sooner when another
  // FIFO thread used the CPU just before): a round counts only while
  // worker 1 has not run since its CPU was taken (its parks and received
  // rings unchanged). An attempt in which worker 1 ran before the first
  // round ended checks nothing and is made again, up to three times.
  // Decided by which worker ran each task, never by time.
  urt::runtime_options o;
  if (!on_two_cpus(o)) return;
  o.idle_spin = std::chrono::milliseconds{20};  // worker 0 stays awake between rounds
  o.idle_spin_policy = urt::spin_policy::fixed;
  struct outcome {
    bool fifo_refused = false;
    int counted = 0;      // rounds that ended before worker 1 ran
    int placed_on_1 = 0;  // of them, urgent tasks placed on worker 1
    int ran_on_0 = 0;     // of them, urgent tasks run by worker 0
  };
  const auto attempt = [&o] {
    outcome out;
    urt::runtime rt(o);
    REQUIRE(rt.worker_count() == 2);
    worker_1_held held(rt);
    if (held.refused()) {
      out.fifo_refused = true;
      return out;
    }
    for (int r = 0; r < 20; ++r) {
      std::latch woke(1);
      rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, [&] { woke.count_down(); });
      woke.wait();
      const std::uint64_t accepted_1 = rt.stats().workers[1].accepted;
      std::atomic<unsigned> ran_on{~0U};
      std::latch ran(1);
      rt.spawn({.priority = 90}, [&] {
        ran_on.store(urt::this_task::worker_id());
        ran.count_down();
      });
      const bool on_1 = rt.stats().workers[1].accepted > accepted_1;
      ran.wait();
      if (held.worker_1_ran()) break;  // no longer the case under test
      ++out.counted;
      if (on_1) ++out.placed_on_1;
      if (ran_on.load() == 0) ++out.ran_on_0;
    }
    held.release();
    rt.stop();
    return out;
  };
  outcome out;
  for (int a = 0; a < 3 && out.counted == 0; ++a) {
    out = attempt();
    if (out.fifo_refused) {
      MESSAGE("a SCHED_FIFO thread on worker 1's CPU is not permitted here: not checked");
      return;
    }
    MESSAGE("attempt " << a + 1 << ": " << out.counted << " rounds before worker 1 ran; "
                       << out.placed_on_1 << " of their urgent tasks were placed on worker 1");
    CHECK(out.ran_on_0 == out.counted);
  }
  // The first round ends in microseconds once worker 0 takes the task, long
  // before the kernel gives a starved thread its first turn.
  CHECK(out.counted > 0);
}

TEST_CASE("resched: an urgent spawn onto the awake worker of the caller's CPU runs on a peer") {
  // Two real workers on two CPUs. Worker 1 runs a task and spins idle: its
  // doorbell says awake. A thread pinned to worker 1's CPU at SCHED_FIFO
  // then spawns an urgent task and spins until it ran, so worker 1 does
  // not run meanwhile (an outside poster on a worker's CPU, as in a paced
  // urt-peers (e): the worker waits for the poster to block). Placement
  // puts the task on worker 1, the idle one, as worker 0 runs a task at
  // priority 1 that reaches preemption points: the task must run there,
  // at one of them. An attempt in which worker 1 had parked before the
  // spawn (the OS started the spawning thread only after worker 1's idle
  // spin ended) is not the case under test and is made again, up to three
  // times. Decided by which worker ran it, never by time.
  urt::runtime_options o;
  if (!on_two_cpus(o)) return;
  o.idle_spin = std::chrono::milliseconds{50};  // worker 1 is awake at the spawn
  o.idle_spin_policy = urt::spin_policy::fixed;
  struct outcome {
    bool fifo_refused = false;
    bool parked_before = false;  // worker 1 had parked before the spawn
    bool placed_on_1 = false;
    unsigned urgent_worker = ~0U;
  };
  const auto attempt = [&o] {
    urt::runtime rt(o);
    REQUIRE(rt.worker_count() == 2);
    const int cpu_1 = static_cast<int>(rt.stats().workers[1].pu);

    std::atomic<bool> urgent_ran{false};
    std::atomic<unsigned> urgent_worker{~0U};
    std::latch holding(1);
    std::latch hold_ended(1);
    rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, [&] {
      holding.count_down();
      const auto until = steady_clock::now() + patience;
      while (!urgent_ran.load() && steady_clock::now() < until) {
        if (urt::preempt_point()) break;
      }
      hold_ended.count_down();
    });
    holding.wait();
    std::latch ran_1(1);
    rt.spawn({.priority = 1, .affinity = urt::worker_set{1}}, [&] { ran_1.count_down(); });
    ran_1.wait();
    const std::uint64_t parks_1 = rt.stats().workers[1].parks;

    outcome out;
    std::thread caller([&] {
      if (fifo_on(cpu_1) != 0) {
        out.fifo_refused = true;
        urgent_ran.store(true);  // ends worker 0's task
        return;
      }
      const urt::worker_stats before = rt.stats().workers[1];
      out.parked_before = before.parks != parks_1;
      rt.spawn({.priority = 90}, [&] {
        urgent_worker.store(urt::this_task::worker_id());
        urgent_ran.store(true);
      });
      out.placed_on_1 = rt.stats().workers[1].accepted > before.accepted;
      // Bounded: a failing run ends here, and worker 1 then runs the task.
      const auto until = steady_clock::now() + patience;
      while (!urgent_ran.load() && steady_clock::now() < until) {
      }
    });
    caller.join();
    hold_ended.wait();
    rt.stop();
    out.urgent_worker = urgent_worker.load();
    return out;
  };
  outcome out;
  for (int a = 0; a < 3 && (a == 0 || out.parked_before); ++a) {
    out = attempt();
    if (out.fifo_refused) {
      MESSAGE("a SCHED_FIFO thread on worker 1's CPU is not permitted here: not checked");
      return;
    }
  }
  CHECK_FALSE(out.parked_before);  // worker 1 was awake at the spawn
  CHECK(out.placed_on_1);
  CHECK(out.urgent_worker == 0);
}

TEST_CASE("resched: an urgent burst onto a worker given no CPU runs on the stepping peer") {
  // As the first live case: a SCHED_FIFO thread holds worker 1's CPU after
  // worker 1 parked. Worker 0 steps through a chain of priority-1 tasks.
  // Five urgent spawns from worker 0's CPU, back to back, land on worker 1
  // (idle, below worker 0's level): the first raises a request, the others
  // find it raised. Worker 0 must run all five, one after another, before
  // any more of its own chain (its claim takes the first; its steps after
  // each urgent task take the rest). Worker 1 was late to the first: after
  // the claim worker 0 pulls the rest at each lowering (balancer.hpp), not
  // after waiting ipi_timeout each for a push worker 1 cannot make.
  // Decided by which worker ran each, how many chain tasks had run by then,
  // and worker 0's counters, never by time.
  urt::runtime_options o;
  if (!on_two_cpus(o)) return;
  urt::runtime rt(o);
  REQUIRE(rt.worker_count() == 2);
  worker_1_held held(rt);
  if (held.refused()) {
    MESSAGE("a SCHED_FIFO thread on worker 1's CPU is not permitted here: not checked");
    return;
  }

  // Worker 0's chain: each task counts itself and spawns the next.
  std::atomic<std::uint64_t> chain{0};
  std::atomic<bool> done{false};
  std::function<void()> link = [&] {
    const auto end = steady_clock::now() + std::chrono::microseconds{50};  // a bulk task
    while (steady_clock::now() < end) {
    }
    chain.fetch_add(1);
    if (!done.load()) rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, link);
  };
  rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, link);
  while (chain.load() < 100) std::this_thread::yield();
  constexpr int burst = 5;
  std::array<std::atomic<unsigned>, burst> ran_on{};
  std::array<std::atomic<std::uint64_t>, burst> chain_at{};
  std::atomic<int> ran{0};
  const std::uint64_t accepted_1 = rt.stats().workers[1].accepted;
  const urt::worker_stats w0_before = rt.stats().workers[0];
  for (int i = 0; i < burst; ++i) {
    ran_on[static_cast<std::size_t>(i)].store(~0U);
    rt.spawn({.priority = 90}, [&, i] {
      ran_on[static_cast<std::size_t>(i)].store(urt::this_task::worker_id());
      chain_at[static_cast<std::size_t>(i)].store(chain.load());
      ran.fetch_add(1);
    });
  }
  const std::uint64_t placed_on_1 = rt.stats().workers[1].accepted - accepted_1;
  const auto until = steady_clock::now() + patience;
  while (ran.load() < burst && steady_clock::now() < until) std::this_thread::yield();
  const bool worker_1_ran = held.worker_1_ran();
  const urt::worker_stats w0_after = rt.stats().workers[0];
  done.store(true);
  held.release();
  rt.stop();
  REQUIRE(ran.load() == burst);
  CHECK(placed_on_1 == burst);
  if (worker_1_ran) {
    MESSAGE(
        "worker 1 ran before the burst did (the kernel's turn for a starved thread): "
        "not checked");
    return;
  }
  for (int i = 0; i < burst; ++i) {
    CAPTURE(i);
    CHECK(ran_on[static_cast<std::size_t>(i)].load() == 0);
    CHECK(chain_at[static_cast<std::size_t>(i)].load() == chain_at[0].load());
  }
  MESSAGE("worker 0 during the burst: "
          << w0_after.resched_claims - w0_before.resched_claims << " claims, "
          << w0_after.fallbacks - w0_before.fallbacks << " hops taken over, "
          << w0_after.stuck_pulls - w0_before.stuck_pulls << " pulls from a stuck worker");
  CHECK(w0_after.fallbacks - w0_before.fallbacks == 0);
}

TEST_CASE("resched: a worker still walking its own burst claims no request at that burst's level") {
  // Worker 1 comes out of a task with 1,024 nodes at priority 5 in its
  // inbox: more than one take reverses (inbox::reverse, 256), so its first
  // steps move none of them into its run queue, which stays empty. A
  // request at 5 is raised meanwhile for worker 0 (held in a task at 1).
  // Counted idle, worker 1 claimed it, took worker 0's inbox in and ran
  // that task before its own burst; with the burst's level counted, its
  // own tasks at 5 come first (FIFO within the level: they were spawned
  // first). Decided by worker 1's claim count when its first own task ran,
  // never by time.
  urt::runtime rt(urt_test::synthetic_workers(urt_test::flat_n(2)));
  std::atomic<bool> release_0{false};
  std::atomic<bool> release_1{false};
  std::latch held(2);
  const auto hold = [&](std::atomic<bool>& release) {
    held.count_down();
    const auto until = steady_clock::now() + patience;
    while (!release.load() && steady_clock::now() < until) std::this_thread::yield();
  };
  rt.spawn({.priority = 1, .affinity = urt::worker_set{0}}, [&] { hold(release_0); });
  rt.spawn({.priority = 90, .affinity = urt::worker_set{1}}, [&] { hold(release_1); });
  held.wait();
  constexpr int burst = 1024;
  std::atomic<int> own_ran{0};
  std::atomic<std::uint64_t> claims_at_first{~std::uint64_t{0}};
  const std::uint64_t claims_before = rt.stats().workers[1].resched_claims;
  for (int i = 0; i < burst; ++i) {
    rt.spawn({.priority = 5, .affinity = urt::worker_set{1}}, [&] {
      if (own_ran.fetch_add(1) == 0) claims_at_first.store(rt.stats().workers[1].resched_claims);
    });
  }
  // Any worker may run it: placed on worker 0 (level 1; worker 1 shows 90),
  // which runs on, so a request at 5 is raised for it.
  std::atomic<unsigned> movable_on{~0U};
  rt.spawn({.priority = 5}, [&] { movable_on.store(urt::this_task::worker_id()); });
  REQUIRE(rt.stats().workers[0].accepted >= 2);
  release_1.store(true);
  const auto until = steady_clock::now() + patience;
  while (own_ran.load() < burst && steady_clock::now() < until) std::this_thread::yield();
  release_0.store(true);
  rt.stop();
  REQUIRE(own_ran.load() == burst);
  CAPTURE(movable_on.load());
  CHECK(claims_at_first.load() == claims_before);
}
