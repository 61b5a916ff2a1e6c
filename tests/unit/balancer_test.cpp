// Tests of a worker's migration policy (runtime/balancer.*), driven
// single-threaded on synthetic topologies with a recorder in place of the
// doorbells: what it pushes and whom it rings, when a failed push is
// retried, lowering in pull and push_ipi mode, serving and forwarding the
// push token, the stuck-hop fallback (invariant 7), and the reschedule
// requests a push raises.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "balancer.hpp"
#include "cpupri.hpp"
#include "migrator.hpp"
#include "overload.hpp"
#include "resched.hpp"
#include "stranded.hpp"
#include "urt/topology.hpp"
#include "worker_counters.hpp"

using urt::migration_mode;
using urt::detail::balancer;
using urt::detail::cpupri;
using urt::detail::migrator;
using urt::detail::rt_queue;
using urt::detail::task_node;

namespace {

// Records whom the balancers rang; every doorbell "was written" (the
// target was parked) unless `written` says otherwise.
struct recorder final : urt::detail::peer_bells {
  bool ring(unsigned w) noexcept override {
    rung.push_back(w);
    return written;
  }
  bool written = true;
  bool hand_token(unsigned w, std::uint64_t seq) noexcept override {
    hops.emplace_back(w, seq);
    return true;
  }
  std::vector<unsigned> rung;
  std::vector<std::pair<unsigned, std::uint64_t>> hops;
};

// A runtime's shared structures and one balancer per worker, no threads.
struct machine {
  machine(const std::string& synthetic, migration_mode mode,
          std::chrono::nanoseconds ipi_timeout = std::chrono::milliseconds{100})
      : topo(urt::topology_options{.source = urt::topology_source::synthetic(synthetic)}),
        prio(urt::cpupri_layout::per_llc_bytes, topo.workers()),
        overload(topo.workers()),
        resched(topo.workers()),
        marks(topo.workers()),
        queues(topo.worker_count(), nullptr),
        m(queues, prio, overload),
        counters(topo.worker_count()) {
    for (unsigned w = 0; w < n(); ++w) {
      owned.push_back(std::make_unique<rt_queue>());
      queues[w] = owned.back().get();
    }
    for (unsigned w = 0; w < n(); ++w) {
      balancers.push_back(std::make_unique<balancer>(
          w, balancer::config{mode, ipi_timeout},
          balancer::shared_parts{m, prio, overload, token, bells, resched, marks, n()}, *queues[w],
          counters[w]));
      m.publish(w);
    }
  }
  [[nodiscard]] unsigned n() const { return static_cast<unsigned>(topo.worker_count()); }
  rt_queue& q(unsigned w) { return *queues[w]; }
  balancer& b(unsigned w) { return *balancers[w]; }

  task_node* make(int priority) {
    nodes.push_back(std::make_unique<task_node>());
    task_node* t = nodes.back().get();
    t->priority = priority;
    t->any_worker = true;
    t->migratable = true;
    return t;
  }
  void enqueue(unsigned w, int priority) {
    q(w).enqueue(make(priority), w);
    m.publish(w);
  }
  // Worker w takes a scheduling point (with an empty inbox).
  void point(unsigned w) {
    marks.point(w, [] { return false; });
  }
  // The worker's running level changes (a task started, or it went idle).
  void run(unsigned w, int level) {
    q(w).running = level;
    m.publish(w);
  }
  std::optional<std::uint64_t> push_due(unsigned w) {
    q(w).lock.lock();
    auto due = b(w).push_due();
    q(w).lock.unlock();
    return due;
  }
  std::uint64_t get(const std::atomic<std::uint64_t>& c) const { return c.load(); }

  urt::topology topo;
  cpupri prio;
  urt::detail::overload_mask overload;
  urt::detail::push_token token;
  recorder bells;
  urt::detail::resched_requests resched;
  urt::detail::stranded_marks marks;  // the workers' scheduling point counts
  std::vector<rt_queue*> queues;
  migrator m;
  std::vector<urt::detail::worker_counters> counters;
  std::vector<std::unique_ptr<rt_queue>> owned;
  std::vector<std::unique_ptr<balancer>> balancers;
  std::vector<std::unique_ptr<task_node>> nodes;
};

}  // namespace

TEST_CASE("balancer: push_tasks moves every task a lower worker can take and rings each target") {
  for (const char* shape : {"core:4 pu:1", "pack:2 [numa] l3:2 core:2 pu:1"}) {
    CAPTURE(shape);
    machine mc(shape, migration_mode::push_ipi);
    mc.run(0, 50);
    for (int p : {40, 30, 20}) mc.enqueue(0, p);
    const auto due = mc.push_due(0);
    REQUIRE(due.has_value());
    mc.b(0).push_tasks(*due);
    CHECK(mc.q(0).rq.empty());
    const std::set<unsigned> targets(mc.bells.rung.begin(), mc.bells.rung.end());
    CHECK(mc.bells.rung.size() == 3);
    CHECK(targets == std::set<unsigned>{1, 2, 3});  // each went to its own idle worker
    CHECK(mc.get(mc.counters[0].pushes) == 3);
    CHECK(mc.get(mc.counters[0].doorbells_sent) == 3);
    for (unsigned w : targets) CHECK(mc.q(w).rq.size() == 1);
    CHECK_FALSE(mc.push_due(0).has_value());  // nothing pushable left
  }
}

TEST_CASE("balancer: a failed push waits for the top to change under push_ipi and pull but not none") {
  for (const migration_mode mode :
       {migration_mode::push_ipi, migration_mode::pull, migration_mode::none}) {
    CAPTURE(static_cast<int>(mode));
    machine mc("core:2 pu:1", mode);
    mc.run(0, 50);
    mc.run(1, 50);
    mc.enqueue(0, 40);
    auto due = mc.push_due(0);
    REQUIRE(due.has_value());
    mc.b(0).push_tasks(*due);  // worker 1 is not lower: fails
    CHECK(mc.q(0).rq.size() == 1);
    CHECK(mc.bells.rung.empty());
    CHECK(mc.push_due(0).has_value() == (mode == migration_mode::none));
    mc.enqueue(0, 45);  // a new top: worth a search again
    CHECK(mc.push_due(0).has_value());
  }
}

TEST_CASE("balancer: lowering in pull mode takes the more urgent task at once, ringing nobody") {
  machine mc("l3:2 core:2 pu:1", migration_mode::pull);
  mc.run(1, 50);
  mc.enqueue(1, 40);
  mc.run(0, 10);
  mc.run(0, urt::detail::cpupri::level_idle);  // worker 0 lowered
  REQUIRE(mc.b(0).overload_seen_after_lowering());
  mc.b(0).on_lowering(balancer::wait_for_push::no);
  CHECK(mc.q(0).rq.size() == 1);
  CHECK(mc.q(1).rq.empty());
  CHECK(mc.get(mc.counters[0].pulls) == 1);
  CHECK(mc.bells.rung.empty());
  CHECK(mc.bells.hops.empty());
  CHECK_FALSE(mc.overload.test(1));  // the puller is overloaded now, the source not
}

TEST_CASE("balancer: lowering in push_ipi mode sends the token and the holder pushes and forwards") {
  machine mc("core:3 pu:1", migration_mode::push_ipi);
  mc.run(1, 50);
  mc.enqueue(1, 40);
  mc.run(0, urt::detail::cpupri::level_idle);
  mc.b(0).on_lowering(balancer::wait_for_push::no);
  REQUIRE(mc.bells.hops.size() == 1);
  const auto [target, seq] = mc.bells.hops.front();
  CHECK(target == 1);  // the one overloaded worker, never the sender
  CHECK(mc.get(mc.counters[0].token_hops) == 1);
  CHECK(mc.q(0).rq.empty());  // asking moves nothing by itself

  CHECK_FALSE(mc.b(1).hop_pending());
  mc.b(1).accept_hop(seq);
  CHECK(mc.b(1).hop_pending());
  mc.b(1).serve_token();
  CHECK_FALSE(mc.b(1).hop_pending());
  CHECK(mc.q(1).rq.empty());
  CHECK(mc.q(0).rq.size() + mc.q(2).rq.size() == 1);  // pushed to an idle worker
  CHECK(mc.bells.rung.size() == 1);
  CHECK(mc.bells.hops.size() == 1);      // nobody is overloaded now: no further hop
  CHECK_FALSE(mc.token.travelling());    // the token came to rest
  mc.b(1).serve_token();                 // nothing pending: nothing happens
  CHECK(mc.bells.rung.size() == 1);
}

TEST_CASE("balancer: an idle worker takes over a hop pending past ipi_timeout (invariant 7)") {
  machine mc("core:3 pu:1", migration_mode::push_ipi, std::chrono::nanoseconds{1});
  mc.run(1, 50);
  mc.enqueue(1, 40);
  mc.run(0, urt::detail::cpupri::level_idle);
  mc.b(0).on_lowering(balancer::wait_for_push::no);  // hop to 1, which never serves it
  REQUIRE(mc.token.travelling());
  // Worker 2 goes idle: the hop is older than 1 ns, so it takes it over and
  // pulls from the stuck worker instead of parking.
  balancer::idle_plan plan = mc.b(2).before_idle();
  while (!plan.pulled && mc.token.travelling()) plan = mc.b(2).before_idle();
  CHECK(plan.pulled);
  CHECK(mc.get(mc.counters[2].fallbacks) == 1);
  CHECK(mc.get(mc.counters[2].pulls) == 1);
  CHECK(mc.q(2).rq.size() == 1);
  CHECK(mc.q(1).rq.empty());
}

TEST_CASE("balancer: an idle worker with the token at rest parks with no token deadline") {
  machine mc("core:2 pu:1", migration_mode::push_ipi);
  const balancer::idle_plan plan = mc.b(0).before_idle();
  CHECK_FALSE(plan.pulled);
  CHECK(plan.token_check == urt::clock::time_point::max());
}

TEST_CASE("balancer: committing to a task waits for the push, then pulls from a stuck holder") {
  machine mc("core:2 pu:1", migration_mode::push_ipi, std::chrono::microseconds{50});
  mc.run(1, 50);
  mc.enqueue(1, 40);
  mc.run(0, 10);  // worker 0 about to run a 10 while a 40 waits on worker 1
  mc.b(0).on_lowering(balancer::wait_for_push::yes);  // worker 1 never serves the hop
  CHECK(mc.q(0).rq.size() == 1);  // pulled after ipi_timeout
  CHECK(mc.q(1).rq.empty());
  CHECK(mc.get(mc.counters[0].fallbacks) == 1);
  CHECK(mc.get(mc.counters[0].pulls) == 1);
}

TEST_CASE(
    "balancer: a worker found stuck is pulled from at once until it takes a scheduling point") {
  // Worker 1 runs at 50 and queues four tasks at 40 it never pushes (it
  // gets no CPU). Worker 0 finds it stuck once, at the first hop's
  // timeout; each further lowering pulls at once, taking over no hop,
  // until worker 1 takes a scheduling point, after which worker 0 waits
  // for the push again.
  machine mc("core:2 pu:1", migration_mode::push_ipi, std::chrono::microseconds{50});
  mc.run(1, 50);
  for (int i = 0; i < 4; ++i) mc.enqueue(1, 40);
  mc.run(0, 10);
  mc.b(0).on_lowering(balancer::wait_for_push::yes);
  CHECK(mc.get(mc.counters[0].fallbacks) == 1);  // waited ipi_timeout, took the hop over
  CHECK(mc.get(mc.counters[0].pulls) == 1);
  mc.q(0).pop();  // worker 0 ran the pulled task
  mc.run(0, 10);
  mc.b(0).on_lowering(balancer::wait_for_push::yes);
  CHECK(mc.get(mc.counters[0].fallbacks) == 1);  // no second wait: pulled at once
  CHECK(mc.get(mc.counters[0].stuck_pulls) == 1);
  CHECK(mc.get(mc.counters[0].pulls) == 2);
  mc.q(0).pop();
  mc.run(0, urt::detail::cpupri::level_idle);  // nothing of its own: before parking, the same
  const balancer::idle_plan plan = mc.b(0).before_idle();
  CHECK(plan.pulled);
  CHECK(mc.get(mc.counters[0].fallbacks) == 1);
  CHECK(mc.get(mc.counters[0].stuck_pulls) == 2);
  CHECK(mc.get(mc.counters[0].pulls) == 3);
  CHECK(mc.q(1).rq.size() == 1);
  mc.q(0).pop();

  mc.point(1);  // worker 1 reached a scheduling point: it can push again
  mc.run(0, 10);
  mc.b(0).on_lowering(balancer::wait_for_push::yes);
  CHECK(mc.get(mc.counters[0].fallbacks) == 2);  // waited for the push, then took the hop over
  CHECK(mc.get(mc.counters[0].stuck_pulls) == 2);
  CHECK(mc.get(mc.counters[0].pulls) == 4);
  CHECK(mc.q(1).rq.empty());
}

TEST_CASE("balancer: a worker whose inbox a watcher took in is pulled from before parking") {
  machine mc("core:3 pu:1", migration_mode::push_ipi);  // ipi_timeout 100 ms: no hop times out
  mc.run(1, 50);
  mc.enqueue(1, 40);
  mc.enqueue(1, 40);
  mc.b(0).note_stuck(1);  // as worker::idle after take_in_for_peer(1), or a claim
  mc.run(0, urt::detail::cpupri::level_idle);
  balancer::idle_plan plan = mc.b(0).before_idle();
  CHECK(plan.pulled);
  CHECK(mc.get(mc.counters[0].pulls) == 1);
  CHECK(mc.get(mc.counters[0].stuck_pulls) == 1);
  CHECK(mc.get(mc.counters[0].fallbacks) == 0);
  // Another idle worker found nothing stuck: it waits for the token.
  mc.run(2, urt::detail::cpupri::level_idle);
  mc.b(2).on_lowering(balancer::wait_for_push::no);
  plan = mc.b(2).before_idle();
  CHECK_FALSE(plan.pulled);
  CHECK(plan.token_check != urt::clock::time_point::max());
  CHECK(mc.q(1).rq.size() == 1);
  mc.point(1);
  mc.q(0).pop();
  mc.run(0, urt::detail::cpupri::level_idle);
  plan = mc.b(0).before_idle();
  CHECK_FALSE(plan.pulled);  // worker 1 took a scheduling point: no longer stuck
}

TEST_CASE("balancer: a push raises a reschedule request when its target will be late to the task") {
  // Worker 0 runs at 50 with a task at 40 queued; worker 2 runs at 60, so
  // worker 1 is the only target. Whether the push asks the other workers
  // to step in depends on what worker 1 was doing (resched.hpp).
  struct case_t {
    const char* what;
    int target_level;  // worker 1's running level
    bool parked;       // the ring wrote its doorbell
    int request;       // worker 1's request byte afterwards
  };
  const int idle = cpupri::level_idle;
  for (const case_t c : {case_t{"busy below the task", 10, false, 40},
                         case_t{"parked", idle, true, 40},
                         case_t{"idle and awake", idle, false, 0}}) {
    CAPTURE(c.what);
    machine mc("core:3 pu:1", migration_mode::push_ipi);
    mc.bells.written = c.parked;
    mc.run(0, 50);
    mc.run(1, c.target_level);
    mc.run(2, 60);
    mc.q(0).enqueue(mc.make(40), 0);
    mc.m.publish(0);
    const auto due = mc.push_due(0);
    REQUIRE(due.has_value());
    mc.b(0).push_tasks(*due);
    CHECK(mc.q(1).rq.size() == 1);  // pushed either way
    CHECK(mc.resched.requested(1) == c.request);
    CHECK(mc.resched.pending() == (c.request != 0));
  }
}
