// Tests of the moves between run queues (runtime/migrator.*, runtime/rt_queue.*), driven
// single-threaded on synthetic topologies up to 1024 workers: invariant 4
// (overloaded iff a pushable task is queued), invariant 6 (a push only to a
// strictly lower worker, within the affinity), pull semantics, conservation
// of tasks (nothing lost or duplicated), and settling (invariant 5) of a
// simulated scheduler that runs tasks which never finish.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../topologies.hpp"
#include "cpupri.hpp"
#include "migrator.hpp"
#include "overload.hpp"
#include "urt/topology.hpp"

using urt::worker_place;
using urt::worker_set;
using urt::detail::cpupri;
using urt::detail::migrator;
using urt::detail::overload_mask;
using urt::detail::rt_queue;
using urt::detail::task_node;
using urt_test::places;

namespace {

constexpr unsigned none = migrator::none;

// N queues with a cpupri and an overload mask, every worker idle.
struct machine {
  explicit machine(const urt_test::shape& shape,
                   urt::cpupri_layout layout = urt::cpupri_layout::per_llc_bytes)
      : p(places(shape)), prio(layout, p), overload(p) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      owned.push_back(std::make_unique<rt_queue>());
      queues.push_back(owned.back().get());
    }
    m = std::make_unique<migrator>(queues, prio, overload);
    for (unsigned w = 0; w < n(); ++w) m->publish(w);
  }
  [[nodiscard]] unsigned n() const { return static_cast<unsigned>(p.size()); }
  rt_queue& q(unsigned w) { return *queues[w]; }

  task_node* make(int priority, std::optional<worker_set> affinity = std::nullopt) {
    nodes.push_back(std::make_unique<task_node>());
    task_node* t = nodes.back().get();
    t->priority = priority;
    t->any_worker = !affinity.has_value();
    if (affinity) t->affinity = *affinity;
    t->migratable = affinity ? affinity->count() > 1 : n() > 1;
    return t;
  }
  void enqueue(unsigned w, task_node* t) {
    q(w).enqueue(t, w);
    m->publish(w);
  }
  void run(unsigned w, int level) {
    q(w).running = level;
    m->publish(w);
  }
  // Invariant 4 and the published levels, for every worker.
  // The CHECKs run only for a worker that fails one: 3 assertions per
  // worker per call would make 1024 workers slow under the sanitizers.
  void check_published() {
    for (unsigned w = 0; w < n(); ++w) {
      if (overload.test(w) == !q(w).pushable.empty() &&
          overload.top(w) == q(w).pushable.top_level() && prio.level(w) == q(w).current()) {
        continue;
      }
      CAPTURE(w);
      CHECK(overload.test(w) == !q(w).pushable.empty());
      CHECK(overload.top(w) == q(w).pushable.top_level());
      CHECK(prio.level(w) == q(w).current());
    }
  }
  [[nodiscard]] std::size_t queued() {
    std::size_t total = 0;
    for (unsigned w = 0; w < n(); ++w) total += q(w).rq.size();
    return total;
  }

  std::vector<worker_place> p;
  cpupri prio;
  overload_mask overload;
  std::vector<std::unique_ptr<rt_queue>> owned;
  std::vector<rt_queue*> queues;
  std::unique_ptr<migrator> m;
  std::vector<std::unique_ptr<task_node>> nodes;
};

const urt_test::shape topologies[] = {urt_test::flat_n(2),   urt_test::flat,     urt_test::smt_llcs,
                                      urt_test::workers_256, urt_test::two_numa, urt_test::uneven,
                                      urt_test::workers_1024};

}  // namespace

TEST_CASE("migrator: a push goes to the lowest worker, strictly lower, highest pushable first") {
  machine mc(urt_test::flat);
  mc.run(0, 50);
  mc.run(1, 40);
  mc.run(2, 60);
  mc.run(3, 70);
  task_node* pinned = mc.make(90, worker_set{0});
  task_node* low = mc.make(30);
  task_node* high = mc.make(45);
  mc.enqueue(0, pinned);
  mc.enqueue(0, low);
  mc.enqueue(0, high);
  mc.check_published();
  CHECK(mc.overload.top(0) == 45);
  // The most urgent pushable task (45; the pinned 90 is not pushable) goes to
  // the lowest worker below it: worker 1 at 40.
  CHECK(mc.m->push_one(0, 0).target == 1);
  CHECK(high->queued_on == 1);
  CHECK(mc.q(1).current() == 45);
  mc.check_published();
  // 30: nobody is below 30 now (1 is at 45).
  CHECK(mc.m->push_one(0, 0).target == none);
  CHECK(low->queued_on == 0);
  // Worker 3 goes idle: now the 30 can go there.
  mc.run(3, cpupri::level_idle);
  CHECK(mc.m->push_one(0, 0).target == 3);
  CHECK(low->queued_on == 3);
  // Only the pinned task is left: not overloaded, nothing to push.
  CHECK_FALSE(mc.overload.test(0));
  CHECK(mc.m->push_one(0, 0).target == none);
  CHECK(pinned->queued_on == 0);
  mc.check_published();
  CHECK(mc.q(0).migrated_out.load() == 2);
  CHECK(mc.q(1).migrated_in.load() == 1);
  CHECK(mc.q(3).migrated_in.load() == 1);
}

TEST_CASE("migrator: a push respects the affinity and never targets a stopped worker") {
  machine mc(urt_test::flat);
  mc.run(0, 50);
  mc.run(1, cpupri::level_idle);
  mc.run(2, 10);
  mc.run(3, cpupri::level_invalid);  // stopped: not routable
  task_node* t = mc.make(40, worker_set{0, 2, 3});
  mc.enqueue(0, t);
  // Worker 1 is idle (lowest) but outside the affinity; 3 is stopped.
  CHECK(mc.m->push_one(0, 0).target == 2);
  CHECK(t->queued_on == 2);
  mc.check_published();
}

TEST_CASE("migrator: a worker holding FIFO back (its budget spent) sheds its FIFO tasks and takes none") {
  machine mc(urt_test::flat_n(3));
  mc.run(0, cpupri::level_idle);
  mc.run(1, cpupri::level_idle);
  mc.run(2, 30);
  task_node* a = mc.make(40);
  task_node* b = mc.make(35);
  mc.enqueue(0, a);
  mc.enqueue(0, b);
  // Worker 0's budget is spent: it shows the top level (bandwidth.hpp), so
  // its queued FIFO tasks look like a backlog behind a task of priority 99.
  mc.q(0).fifo_held = true;
  mc.m->publish(0);
  mc.check_published();
  CHECK(mc.q(0).current() == urt::priority_max);
  // Pulled by worker 2, whose own level (30) is below the 40, as from any
  // overloaded worker...
  CHECK(mc.m->pull_from(2, 0));
  CHECK(a->queued_on == 2);
  // ... and pushed to the idle worker 1.
  CHECK(mc.m->push_one(0, 0).target == 1);
  CHECK(b->queued_on == 1);
  CHECK(mc.q(0).rq.empty());
  // Nothing FIFO is pushed into the held worker meanwhile, though it is idle.
  task_node* c = mc.make(50);
  mc.enqueue(2, c);
  mc.run(1, 60);
  mc.run(2, 70);
  CHECK(mc.m->push_one(2, 0).target == none);
  CHECK(c->queued_on == 2);
  // The period ends: it shows its own level again and takes pushes.
  mc.q(0).fifo_held = false;
  mc.m->publish(0);
  CHECK(mc.m->push_one(2, 0).target == 0);
  CHECK(c->queued_on == 0);
  mc.check_published();
}

TEST_CASE("migrator: pull takes only a task more urgent than the puller's own next one") {
  machine mc(urt_test::flat_n(3));
  mc.run(0, 80);
  mc.run(1, 80);
  mc.enqueue(0, mc.make(20));
  mc.enqueue(0, mc.make(60));
  mc.enqueue(1, mc.make(70, worker_set{1, 0}));  // not allowed on 2
  mc.enqueue(2, mc.make(30));                    // worker 2's own next task
  mc.run(2, cpupri::level_idle);
  // Worker 2 would run 30 next: it pulls the 60 from worker 0, not the 20,
  // and nothing from worker 1 (the 70 may not run on 2).
  CHECK(mc.m->pull_all(2) == 1);
  CHECK(mc.q(2).current() == 60);
  CHECK(mc.q(0).current() == 80);
  CHECK(mc.q(0).rq.size() == 1);
  CHECK(mc.q(1).rq.size() == 1);
  // Now 2 would run 60: the 20 does not beat it.
  CHECK_FALSE(mc.m->pull_from(2, 0));
  mc.check_published();
}

TEST_CASE("migrator: a move that takes a worker's queued top away marks it lowered") {
  machine mc(urt_test::flat_n(3));
  // Worker 0 runs 10 and has not yet reached the scheduling point that
  // would yield to its queued 16; worker 1 runs 20 with a 14 queued.
  mc.run(0, 10);
  mc.enqueue(0, mc.make(16));
  mc.run(1, 20);
  task_node* fourteen = mc.make(14);
  mc.enqueue(1, fourteen);
  mc.run(2, 18);
  // Nobody is below 14: worker 1's push fails (and push_due() will not
  // retry it until worker 1's top changes).
  CHECK(mc.m->push_one(1, 0).target == none);
  for (unsigned w = 0; w < 3; ++w) CHECK_FALSE(mc.q(w).lowered);
  // Worker 2 lowers and pulls the 16 away from worker 0, which drops to 10:
  // below the 14 waiting on worker 1, but only `lowered` tells it so.
  mc.run(2, cpupri::level_idle);
  CHECK(mc.m->pull_all(2) == 1);
  CHECK(mc.q(0).current() == 10);
  CHECK(mc.prio.level(0) == 10);
  CHECK(mc.q(0).lowered);
  CHECK_FALSE(mc.q(1).lowered);  // nothing left it
  CHECK_FALSE(mc.q(2).lowered);  // raised
  REQUIRE(mc.q(2).pop() != nullptr);  // and runs the 16
  mc.run(2, 16);
  // Acting on it as its owner does at its next scheduling point: the pull
  // brings the 14 over.
  mc.q(0).lowered = false;
  CHECK(mc.m->pull_all(0) == 1);
  CHECK(fourteen->queued_on == 0);
  CHECK_FALSE(mc.q(1).lowered);  // 20 runs there, above what left
  mc.check_published();

  // A move that leaves a more urgent (pinned) task queued lowers nobody;
  // a worker pushing its own queued top away lowers itself.
  machine mc2(urt_test::flat_n(2));
  mc2.run(0, 10);
  mc2.run(1, cpupri::level_idle);
  task_node* pinned = mc2.make(30, worker_set{0});
  mc2.enqueue(0, pinned);
  mc2.enqueue(0, mc2.make(20));
  CHECK(mc2.m->push_one(0, 0).target == 1);
  CHECK(mc2.q(0).current() == 30);
  CHECK_FALSE(mc2.q(0).lowered);
  mc2.q(0).remove(pinned);  // its owner ran it; the 20 runs on worker 1
  mc2.m->publish(0);
  mc2.run(1, 20);
  mc2.enqueue(0, mc2.make(25));
  mc2.run(1, cpupri::level_idle);
  CHECK(mc2.m->push_one(0, 0).target == 1);
  CHECK(mc2.q(0).current() == 10);
  CHECK(mc2.q(0).lowered);
  mc2.check_published();
}

TEST_CASE("migrator: random pushes and pulls keep every task exactly once and invariants 4 and 6") {
  for (const auto& topo : topologies) {
    for (auto layout : {urt::cpupri_layout::global, urt::cpupri_layout::per_llc_bytes}) {
      CAPTURE(topo);
      CAPTURE(static_cast<int>(layout));
      machine mc(topo, layout);
      const unsigned n = mc.n();
      std::mt19937 rng(99);
      std::set<task_node*> live;
      for (int step = 0; step < 3000; ++step) {
        const unsigned w = rng() % n;
        switch (rng() % 6) {
          case 0:
          case 1: {  // spawn onto w, sometimes with a narrow affinity
            std::optional<worker_set> aff;
            if (rng() % 3 == 0) aff = worker_set{w, static_cast<unsigned>((w + 1 + rng() % (n - 1)) % n)};
            if (rng() % 5 == 0) aff = worker_set{w};
            task_node* t = mc.make(static_cast<int>(rng() % 100), aff);
            mc.enqueue(w, t);
            live.insert(t);
            break;
          }
          case 2: {  // w picks its next task and runs it (it leaves the queues)
            if (task_node* t = mc.q(w).pop()) {
              CHECK(t->allowed_on(w));
              live.erase(t);
              mc.run(w, t->priority);
            }
            break;
          }
          case 3:  // w finishes its task
            mc.run(w, cpupri::level_idle);
            break;
          case 4: {  // w pushes; check invariant 6 against the levels before
            task_node* t = mc.q(w).first_pushable();
            std::vector<int> before(n);
            for (unsigned v = 0; v < n; ++v) before[v] = mc.q(v).current();
            const unsigned target = mc.m->push_one(w, static_cast<unsigned>(step)).target;
            if (target != none) {
              REQUIRE(t != nullptr);
              CHECK(target != w);
              CHECK(before[target] < t->priority);
              CHECK(t->allowed_on(target));
              CHECK(t->queued_on == target);
              // The lowest level among the allowed workers was chosen.
              int lowest = 1000;
              for (unsigned v = 0; v < n; ++v) {
                if (v != w && t->allowed_on(v)) lowest = std::min(lowest, before[v]);
              }
              CHECK(before[target] == lowest);
            }
            break;
          }
          default: {  // w pulls from everybody
            const int own = mc.q(w).current();
            const std::size_t was = mc.q(w).rq.size();
            const unsigned pulled = mc.m->pull_all(w);
            CHECK(mc.q(w).rq.size() == was + pulled);
            if (pulled > 0) CHECK(mc.q(w).current() > own);
            break;
          }
        }
        CHECK(mc.queued() == live.size());
        if (step % 50 == 0) mc.check_published();
      }
      // Every live task is queued exactly once, where queued_on says.
      std::size_t found = 0;
      for (unsigned w = 0; w < n; ++w) {
        while (task_node* t = mc.q(w).pop()) {
          CHECK(live.count(t) == 1);
          CHECK(t->queued_on == w);
          CHECK(t->allowed_on(w));
          ++found;
        }
      }
      CHECK(found == live.size());
    }
  }
}

// Invariant 5 on the mechanism alone: a simulated scheduler whose tasks never
// finish. Each worker, at its scheduling point, first pulls (like a lowering
// worker whose push request timed out) and then runs its most urgent task;
// overloaded workers push. Once nothing moves, the running tasks are the N
// most urgent ones.
TEST_CASE("migrator: with M > N never-ending tasks, settling runs the N most urgent") {
  for (const auto& topo : topologies) {
    // Every worker pulls from every overloaded one: quadratic, and 1024
    // workers take seconds under TSAN; 256 is the largest here.
    if (topo.workers > 256) continue;
    CAPTURE(topo);
    machine mc(topo);
    const unsigned n = mc.n();
    std::mt19937 rng(5);
    // Every worker busy at 99 (a plug) while M tasks pile up unevenly.
    for (unsigned w = 0; w < n; ++w) mc.run(w, 99);
    const unsigned m_tasks = n + 1 + rng() % (2 * n);
    std::vector<int> priorities;
    for (unsigned i = 0; i < m_tasks; ++i) {
      const int prio = static_cast<int>(rng() % 99);
      priorities.push_back(prio);
      mc.enqueue(rng() % std::max(1U, n / 3), mc.make(prio));  // the first third only
    }
    // The plugs end one by one; each worker lowers: pulls, then picks.
    std::vector<int> running(n, -1);
    for (unsigned w = 0; w < n; ++w) {
      mc.run(w, cpupri::level_idle);
      mc.m->pull_all(w);
      if (task_node* t = mc.q(w).pop()) {
        running[w] = t->priority;
        mc.run(w, t->priority);
      }
      for (unsigned v = 0; v < n; ++v) {
        while (mc.m->push_one(v, 0).target != none) {
        }
      }
    }
    // Workers whose queue got tasks pushed in after they picked would only
    // see them at their next scheduling point; none may be idle with work.
    for (unsigned w = 0; w < n; ++w) CHECK(running[w] >= 0);
    std::sort(priorities.rbegin(), priorities.rend());
    std::vector<int> ran(running.begin(), running.end());
    std::sort(ran.rbegin(), ran.rend());
    CHECK(ran == std::vector<int>(priorities.begin(), priorities.begin() + n));
    mc.check_published();
  }
}
