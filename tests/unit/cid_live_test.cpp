// Tests of concurrency IDs inside running runtimes (this_task::cid(),
// urt::per_cid, runtime_options::cid_mode): uniqueness per group under
// load on synthetic topologies of up to 1024 workers in both modes,
// convergence after a burst, per_cid's sizing and aggregation, the
// group statistics, and the bad inputs. Nothing asserts a duration.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../topologies.hpp"
#include "urt/urt.hpp"

using namespace std::chrono_literals;

namespace {

using urt::concurrency_id_mode;

urt::runtime_options options_for(const urt_test::shape& s, concurrency_id_mode mode) {
  urt::runtime_options o = urt_test::synthetic_workers(s);
  o.cid_mode = mode;
  // Compaction all the time: every ID idle at all is reclaimable, and a
  // pass may start at any scheduling point.
  o.cid_idle_threshold = 0ns;
  o.cid_scan_interval = 0ns;
  o.cid_scan_batch = 4;
  return o;
}

// ThreadSanitizer runs a thousand threads some ten times slower: fewer tasks
// there keep the test inside its timeout (the interleavings are what it checks).
#if defined(__SANITIZE_THREAD__)
constexpr unsigned sanitizer_slowdown = 8;
#else
constexpr unsigned sanitizer_slowdown = 1;
#endif

constexpr concurrency_id_mode both_modes[] = {concurrency_id_mode::batched_scan,
                                              concurrency_id_mode::ownership};

}  // namespace

TEST_CASE("cid_live: no two running tasks of a group share an ID, in both modes, up to 1024 workers") {
  // This machine's own topology (workers bound to its CPUs), then synthetic ones.
  const urt_test::shape shapes[] = {{"this machine", "", 0, 0, 0}, urt_test::flat,
                                    urt_test::numa_16, urt_test::workers_64,
                                    urt_test::workers_256, urt_test::workers_1024};
  for (const auto& shape : shapes) {
    for (const concurrency_id_mode mode : both_modes) {
      CAPTURE(shape);
      CAPTURE(static_cast<int>(mode));
      urt::runtime_options o = options_for(shape, mode);
      if (shape.synthetic.empty()) o.topology = urt::topology_source::system();
      urt::runtime rt(o);
      const auto workers = static_cast<unsigned>(rt.worker_count());
      constexpr unsigned groups = 3;
      std::vector<urt::group> g{urt::group{}};
      for (unsigned i = 1; i < groups; ++i) g.push_back(rt.make_group({.name = i == 1 ? "one" : "two"}));
      // One slot per (group, ID): a task sets it while it runs.
      std::vector<std::atomic<int>> slots(groups * workers);
      std::atomic<unsigned> clashes{0};
      std::atomic<unsigned> out_of_range{0};
      std::atomic<unsigned> ran{0};
      const auto body = [&](unsigned gi) {
        const unsigned id = urt::this_task::cid();
        if (id >= workers) {
          out_of_range.fetch_add(1);
          return;
        }
        if (slots[gi * workers + id].exchange(1) != 0) clashes.fetch_add(1);
        urt_test::spin_for(200ns);
        if (urt::this_task::cid() != id) clashes.fetch_add(1);  // stable within the task
        slots[gi * workers + id].store(0);
        ran.fetch_add(1);
      };
      const unsigned tasks = (workers >= 256 ? 6000 : 12000) / sanitizer_slowdown;
      for (unsigned i = 0; i < tasks; ++i) {
        const unsigned gi = i % groups;
        const auto prio = static_cast<urt::priority_t>(i % 7 == 0 ? 0 : 1 + i % 20);
        if (i % 4 == 0) {
          // A task that spawns a task of another group from its worker.
          rt.spawn({.priority = prio, .group = g[gi]}, [&, gi] {
            body(gi);
            const unsigned next = (gi + 1) % groups;
            rt.spawn({.priority = 5, .group = g[next]}, [&, next] { body(next); });
          });
        } else {
          rt.spawn({.priority = prio, .group = g[gi]}, [&, gi] { body(gi); });
        }
      }
      rt.stop();
      CHECK(clashes.load() == 0);
      CHECK(out_of_range.load() == 0);
      CHECK(ran.load() == tasks + (tasks + 3) / 4);  // every 4th task spawned a child
      std::uint64_t steps = 0;
      for (const auto& each : g) {
        const urt::group_stats s = rt.stats(each);
        steps += s.cid_steps;
        CHECK(s.highest_cid < static_cast<int>(workers));
        CHECK(s.cids_in_use <= workers);
        CHECK(s.cids_allocated >= 1);
        CHECK(std::accumulate(s.cid_step_ns.begin(), s.cid_step_ns.end(), std::uint64_t{0}) ==
              s.cid_steps);
        if (mode == concurrency_id_mode::ownership) {
          CHECK(s.cid_steps == 0);
          CHECK(s.cids_in_use == 0);  // every worker gave its ID back when it went idle
        }
      }
      if (mode == concurrency_id_mode::batched_scan) CHECK(steps > 0);  // compaction ran meanwhile
    }
  }
}

TEST_CASE("cid_live: after a burst on every worker, activity on two brings the highest ID below 2") {
  for (const concurrency_id_mode mode : both_modes) {
    CAPTURE(static_cast<int>(mode));
    const urt_test::shape& shape = urt_test::numa_16;
    urt::runtime_options o = options_for(shape, mode);
    o.cid_idle_threshold = 1ms;
    urt::runtime rt(o);
    const urt::group g = rt.make_group({.name = "burst"});
    // The burst: one task per worker, all running at once, each with an ID.
    std::latch all_in(static_cast<std::ptrdiff_t>(shape.workers));
    for (unsigned w = 0; w < shape.workers; ++w) {
      rt.spawn({.priority = 50, .affinity = urt::worker_set{w}, .group = g}, [&] {
        (void)urt::this_task::cid();
        all_in.arrive_and_wait();
      });
    }
    all_in.wait();
    // Activity on workers 3 and 11 only, until the highest ID in use is
    // below 2 (bounded: the test fails rather than hangs).
    int highest = static_cast<int>(shape.workers);
    unsigned rounds = 0;
    for (; rounds < 20000 && highest >= 2; ++rounds) {
      std::latch done(2);
      for (const unsigned w : {3U, 11U}) {
        rt.spawn({.priority = 50, .affinity = urt::worker_set{w}, .group = g}, [&] {
          (void)urt::this_task::cid();
          done.count_down();
        });
      }
      done.wait();
      highest = rt.stats(g).highest_cid;
      if (highest >= 2) std::this_thread::sleep_for(100us);
    }
    CAPTURE(rounds);
    CHECK(highest < 2);
    const urt::group_stats s = rt.stats(g);
    CHECK(s.cids_allocated >= shape.workers);
    if (mode == concurrency_id_mode::batched_scan) {
      CHECK(s.cids_reclaimed >= shape.workers - 2);
      CHECK(s.cid_steps > 0);
    } else {
      CHECK(s.cid_steps == 0);
    }
    rt.stop();
  }
}

TEST_CASE("cid_live: a worker keeps its ID across consecutive tasks of the group") {
  urt::runtime_options o = urt_test::synthetic_workers(1);
  urt::runtime rt(o);
  const urt::group g = rt.make_group({.name = "one"});
  std::vector<unsigned> ids;
  for (int i = 0; i < 100; ++i) {
    rt.spawn({.priority = 10, .group = g}, [&] { ids.push_back(urt::this_task::cid()); });
  }
  rt.stop();
  REQUIRE(ids.size() == 100);
  for (const unsigned id : ids) CHECK(id == 0);
  // Taken from the pool once; the worker went idle between tasks at times
  // and found its cached ID again (the default mode).
  CHECK(rt.stats(g).cids_allocated == 1);
}

TEST_CASE("cid_live: per_cid is sized by the IDs used and aggregates with for_each") {
  urt::runtime rt(urt_test::synthetic_workers(urt_test::numa_16));
  const urt::group g = rt.make_group({.name = "counted"});
  urt::per_cid<std::uint64_t> counts(rt, g);
  CHECK(counts.capacity() == 16);
  CHECK(counts.size() == 0);
  constexpr unsigned tasks = 20000;
  for (unsigned i = 0; i < tasks; ++i) {
    rt.spawn({.priority = static_cast<urt::priority_t>(1 + i % 9), .group = g},
             [&] { ++counts.local(); });  // no atomic: the ID is the task's alone
  }
  rt.stop();
  std::uint64_t sum = 0;
  unsigned visited = 0;
  counts.for_each([&](unsigned id, const std::uint64_t& v) {
    CHECK(id < 16);
    sum += v;
    ++visited;
  });
  CHECK(sum == tasks);
  CHECK(visited == counts.size());
  CHECK(counts.size() <= 16);
  CHECK(counts.bytes() == 16 * sizeof(void*) + counts.size() * 64);

  // One worker running the group: one value, one line.
  urt::runtime one(urt_test::synthetic_workers(urt_test::numa_16));
  const urt::group h = one.make_group({.name = "pinned"});
  urt::per_cid<std::uint64_t> pinned(one, h);
  for (unsigned i = 0; i < 1000; ++i) {
    one.spawn({.priority = 3, .affinity = urt::worker_set{7}, .group = h}, [&] { ++pinned.local(); });
  }
  one.stop();
  CHECK(pinned.size() == 1);
  std::uint64_t total = 0;
  pinned.for_each([&](unsigned id, std::uint64_t& v) {
    CHECK(id == 0);
    total += v;
  });
  CHECK(total == 1000);
}

TEST_CASE("cid_live: bad inputs are named") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  urt::runtime other(urt_test::synthetic_workers(2));
  const urt::group g = rt.make_group({.name = "a"});
  const urt::group foreign = other.make_group({.name = "b"});

  CHECK(urt_test::message_of([] { (void)urt::this_task::cid(); }) ==
        "urt::this_task: the calling thread is not running an urt task");
  CHECK_THROWS_AS((void)urt::this_task::cid(), std::logic_error);
  CHECK(urt_test::message_of([&] { urt::per_cid<int> p(rt, foreign); }) ==
        "urt::per_cid: group 1 belongs to another runtime");
  CHECK_THROWS_AS(urt::per_cid<int>(rt, foreign), std::invalid_argument);

  urt::per_cid<int> p(rt, g);
  CHECK(urt_test::message_of([&] { p.local(); }) ==
        "urt::per_cid::local: the calling thread is not running a task of this runtime");
  std::string in_other_group;
  std::string in_other_runtime;
  rt.spawn({}, [&] { in_other_group = urt_test::message_of([&] { p.local(); }); });
  other.spawn({.group = foreign}, [&] { in_other_runtime = urt_test::message_of([&] { p.local(); }); });
  rt.stop();
  other.stop();
  CHECK(in_other_group == "urt::per_cid::local: the calling task is in group 0, not group 1");
  CHECK(in_other_runtime ==
        "urt::per_cid::local: the calling thread is not running a task of this runtime");

  const auto option_error = [](auto set) {
    urt::runtime_options o = urt_test::synthetic_workers(1);
    set(o);
    return urt_test::message_of([&] { o.validate(); });
  };
  CHECK(option_error([](auto& o) { o.cid_scan_batch = 0; }) ==
        "runtime_options.cid_scan_batch: 0 is outside 1..1024");
  CHECK(option_error([](auto& o) { o.cid_scan_batch = 1025; }) ==
        "runtime_options.cid_scan_batch: 1025 is outside 1..1024");
  CHECK(option_error([](auto& o) { o.cid_idle_threshold = -1ns; }) ==
        "runtime_options.cid_idle_threshold: -1ns is negative");
  CHECK(option_error([](auto& o) { o.cid_scan_interval = -5ms; }) ==
        "runtime_options.cid_scan_interval: -5000000ns is negative");
  CHECK(option_error([](auto& o) { o.cid_scan_interval = std::chrono::hours{2}; }) ==
        "runtime_options.cid_scan_interval: 7200000000000ns is above 3600000000000ns (1 h)");
  CHECK(option_error([](auto& o) { o.cid_mode = static_cast<urt::concurrency_id_mode>(7); }) ==
        "runtime_options.cid_mode: value 7 is not a concurrency_id_mode");
}
