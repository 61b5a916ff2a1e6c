// Tests of the concurrency-ID spaces (runtime/cid.hpp), driven directly:
// single-threaded with made-up times on the worker counts of the synthetic
// topologies (uniqueness and bound, keeping an ID across tasks, batched
// compaction's steps, passes and convergence, ownership's eager return),
// then threads racing owners against reclaimers on one space.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "cid.hpp"
#include "../topologies.hpp"

namespace {

using urt::concurrency_id_mode;
using urt::detail::cid_space;
using urt_test::shape;

constexpr std::int64_t ms = 1'000'000;

cid_space::config batched(unsigned batch = 16, std::int64_t threshold = 100 * ms,
                          std::int64_t interval = 100 * ms) {
  return {.mode = concurrency_id_mode::batched_scan,
          .idle_threshold_ns = threshold,
          .batch = batch,
          .interval_ns = interval};
}

cid_space::config ownership() {
  cid_space::config c = batched();
  c.mode = concurrency_id_mode::ownership;
  return c;
}

// A model of the workers using one space: which ID each holds active.
struct model {
  explicit model(cid_space& s) : space(s), active(s.size(), -1), seen(s.size(), 0) {}

  void start(unsigned w) {
    if (active[w] < 0) active[w] = static_cast<int>(space.activate(w));
  }
  void stop(unsigned w, std::int64_t now) {
    if (active[w] >= 0) space.deactivate(w, static_cast<unsigned>(active[w]), now);
    active[w] = -1;
  }
  // A scheduling point of `w` between two tasks of the group.
  void point(unsigned w, std::int64_t now) {
    space.step(now);
    if (active[w] >= 0) active[w] = static_cast<int>(space.keep(w, static_cast<unsigned>(active[w]), seen[w]));
  }
  // No two active workers share an ID, every ID is below the worker count,
  // and the slots agree with the model.
  void check() const {
    std::vector<int> owner(space.size(), -1);
    for (unsigned w = 0; w < space.size(); ++w) {
      if (active[w] < 0) continue;
      REQUIRE(static_cast<unsigned>(active[w]) < space.size());
      REQUIRE(owner[static_cast<unsigned>(active[w])] == -1);
      owner[static_cast<unsigned>(active[w])] = static_cast<int>(w);
      REQUIRE(space.slot_active(w));
      REQUIRE(space.slot_cid(w) == active[w]);
    }
  }
  unsigned highest_active() const {
    return static_cast<unsigned>(*std::max_element(active.begin(), active.end()));
  }

  cid_space& space;
  std::vector<int> active;
  std::vector<std::uint32_t> seen;
};

urt::group_stats stats_of(const cid_space& s) {
  urt::group_stats g;
  s.add_stats(g);
  return g;
}

}  // namespace

TEST_CASE("cid: random switches keep IDs unique and below the worker count in both modes") {
  for (const shape& s : urt_test::mechanism_shapes) {
    for (const auto& cfg : {batched(16, 5 * ms, 10 * ms), batched(1, 0, 0), ownership()}) {
      CAPTURE(s);
      CAPTURE(static_cast<int>(cfg.mode));
      CAPTURE(cfg.batch);
      cid_space space(s.workers, cfg, 0);
      model m(space);
      std::mt19937 rng(s.workers);
      std::int64_t now = 0;
      for (int i = 0; i < 20'000; ++i) {
        const unsigned w = rng() % s.workers;
        now += static_cast<std::int64_t>(rng() % (2 * ms));
        switch (rng() % 3) {
          case 0: m.start(w); break;
          case 1: m.stop(w, now); break;
          default: m.point(w, now); break;
        }
        if (i % 97 == 0) m.check();
      }
      m.check();
      CHECK(space.in_use() <= s.workers);
      CHECK(space.highest_in_use() < static_cast<int>(s.workers));
    }
  }
}

TEST_CASE("cid: a worker finds its cached ID again without allocating, until it is reclaimed") {
  cid_space space(8, batched(), 0);
  model m(space);
  m.start(3);
  const int first = m.active[3];
  m.stop(3, 1 * ms);
  m.start(3);
  CHECK(m.active[3] == first);
  CHECK(stats_of(space).cids_allocated == 1);
  // Idle past the threshold and a pass later, the ID is gone: a new one.
  m.stop(3, 2 * ms);
  m.start(5);
  CHECK(m.active[5] == 1);
  m.point(5, 200 * ms);  // the first pass: the interval since creation is over
  CHECK(space.slot_cid(3) == -1);
  CHECK(stats_of(space).cids_reclaimed == 1);
  CHECK(m.active[5] == 0);  // and worker 5 moved down to the freed ID at the same point
  m.start(3);
  CHECK(m.active[3] == 1);
  CHECK(stats_of(space).cids_allocated == 4);  // 3, 5, 5 moving down, 3 again
  m.check();
}

TEST_CASE("cid: an ID cached again after reactivation is a new word (no ABA)") {
  // The reclaimer's CAS compares the whole word, time included: a slot
  // that was reactivated and cached again since it was read is not taken.
  cid_space space(4, batched(4, 10 * ms, 0), 0);
  model m(space);
  m.start(0);
  m.stop(0, 1 * ms);
  m.start(0);
  m.stop(0, 50 * ms);  // cached again, recently
  m.start(1);
  m.point(1, 55 * ms);  // a pass: slot 0 is 5 ms old, below the threshold, and ID 0 < weight
  CHECK(space.slot_cid(0) == 0);
  CHECK(stats_of(space).cids_reclaimed == 0);
}

TEST_CASE("cid: a step never visits more than the batch and the pass resumes where it stopped") {
  for (const shape& s : {urt_test::workers_256, urt_test::uneven, urt_test::workers_1024}) {
    for (const unsigned batch : {8U, 16U, 32U}) {
      CAPTURE(s);
      CAPTURE(batch);
      cid_space space(s.workers, batched(batch, 10 * ms, 100 * ms), 0);
      std::int64_t now = 100 * ms;
      unsigned visited = 0;
      unsigned steps = 0;
      for (;;) {
        const unsigned v = space.step(now);
        REQUIRE(v <= batch);
        REQUIRE(v > 0);  // a pass under way always has a batch to give
        visited += v;
        ++steps;
        if (visited == s.workers) break;
        REQUIRE(visited < s.workers);
      }
      CHECK(steps == (s.workers + batch - 1) / batch);
      CHECK(stats_of(space).cid_steps == steps);
      // The pass is over: no step until the interval since it started.
      CHECK(space.step(now + 1 * ms) == 0);
      CHECK(space.step(now + 100 * ms - 1) == 0);
      CHECK(space.step(now + 100 * ms) == std::min(batch, s.workers));
    }
  }
}

TEST_CASE("cid: batched_scan converges to the workers still running the group within one pass") {
  for (const shape& s : {urt_test::numa_16, urt_test::workers_256, urt_test::workers_1024}) {
    CAPTURE(s);
    const std::int64_t threshold = 20 * ms;
    cid_space space(s.workers, batched(16, threshold, 100 * ms), 0);
    model m(space);
    // A burst on every worker, which then go idle at 10 ms.
    for (unsigned w = 0; w < s.workers; ++w) m.start(w);
    m.check();
    CHECK(space.highest_in_use() == static_cast<int>(s.workers) - 1);
    for (unsigned w = 0; w < s.workers; ++w) m.stop(w, 10 * ms);
    // Then two workers with high IDs keep running the group.
    const unsigned a = s.workers / 2 + 1;
    const unsigned b = s.workers - 1;
    m.start(a);
    m.start(b);
    CHECK(m.highest_active() == b);  // their cached IDs back
    // After the idle threshold, the first pass starts (the interval since
    // the space was made is over) and runs at their scheduling points.
    std::int64_t now = 100 * ms;
    const std::uint64_t steps_before = stats_of(space).cid_steps;
    for (unsigned i = 0; stats_of(space).cid_steps - steps_before < (s.workers + 15) / 16; ++i) {
      m.point(i % 2 == 0 ? a : b, now);
      REQUIRE(i < 4 * s.workers);
    }
    // One full pass later, and one scheduling point each: IDs 0 and 1.
    m.point(a, now);
    m.point(b, now);
    m.check();
    CHECK(space.in_use() == 2);
    CHECK(space.highest_in_use() < 2);
    CHECK(m.highest_active() < 2);
    CHECK(stats_of(space).cids_reclaimed == s.workers - 2);
  }
}

TEST_CASE("cid: the weight rule reclaims recently cached IDs above the number in use") {
  cid_space space(16, batched(16, 10 * ms, 0), 0);
  model m(space);
  for (unsigned w = 0; w < 8; ++w) m.start(w);  // IDs 0..7
  for (unsigned w = 0; w < 4; ++w) m.stop(w, 1 * ms);   // idle long by the step
  for (unsigned w = 4; w < 7; ++w) m.stop(w, 50 * ms);  // cached a moment before it
  // Worker 7 runs on with ID 7. The step at 55 ms: the age rule takes IDs
  // 0..3; 4 remain in use, so the cached 4, 5 and 6 are above the weight
  // and go too, young as they are.
  m.point(7, 55 * ms);
  CHECK(stats_of(space).cids_reclaimed == 7);
  CHECK(space.in_use() == 1);
  for (unsigned w = 0; w < 7; ++w) CHECK(space.slot_cid(w) == -1);
  // The step left the active worker's slot alone; the same scheduling
  // point, after the step, moved it down (keep()).
  CHECK(m.active[7] == 0);
  CHECK(space.highest_in_use() == 0);
  m.check();
}

TEST_CASE("cid: ownership gives an ID back at the switch and the next one is the lowest free") {
  for (const shape& s : {urt_test::numa_16, urt_test::workers_1024}) {
    CAPTURE(s);
    cid_space space(s.workers, ownership(), 0);
    model m(space);
    for (unsigned w = 0; w < s.workers; ++w) m.start(w);
    CHECK(space.highest_in_use() == static_cast<int>(s.workers) - 1);
    for (unsigned w = 0; w < s.workers; ++w) m.stop(w, 0);
    CHECK(space.in_use() == 0);
    m.start(s.workers - 1);
    m.start(s.workers / 2);
    m.check();
    CHECK(space.highest_in_use() == 1);
    CHECK(space.step(1000 * ms) == 0);  // no scan in this mode
    CHECK(stats_of(space).cids_released == s.workers);
  }
}

TEST_CASE("cid: an active ID is never reclaimed, however old its worker's last switch") {
  cid_space space(4, batched(4, 0, 0), 0);
  model m(space);
  m.start(0);
  m.start(1);
  m.point(2, 1000 * ms);
  m.point(2, 2000 * ms);
  m.check();
  CHECK(m.active[0] >= 0);
  CHECK(m.active[1] >= 0);
  CHECK(stats_of(space).cids_reclaimed == 0);
}

TEST_CASE("cid: owners racing reclaimers on one space never share an ID") {
  // Threads play workers of one space: each loops starting the group,
  // checking its ID in a shared slot table, stopping, stepping; time runs
  // on a shared counter so reclaims happen all the time (threshold 0).
  for (const auto& cfg : {batched(2, 0, 0), batched(16, 1, 0), ownership()}) {
    CAPTURE(static_cast<int>(cfg.mode));
    constexpr unsigned threads = 4;
    constexpr unsigned workers = 6;  // 2 never run: their slots stay unset
    cid_space space(workers, cfg, 0);
    std::vector<std::atomic<int>> table(workers);
    for (auto& t : table) t.store(0);
    std::atomic<std::int64_t> clock{0};
    std::atomic<unsigned> clashes{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::uint32_t seen = 0;
        for (int i = 0; i < 20'000; ++i) {
          unsigned id = space.activate(t);
          for (int k = 0; k < 3; ++k) {  // a few tasks of the group in a row
            if (table[id].exchange(1) != 0) clashes.fetch_add(1);
            table[id].store(0);
            space.step(clock.fetch_add(1000));
            id = space.keep(t, id, seen);
          }
          space.deactivate(t, id, clock.fetch_add(1000));
          space.step(clock.load());
        }
      });
    }
    for (auto& th : pool) th.join();
    CHECK(clashes.load() == 0);
    CHECK(space.highest_in_use() < static_cast<int>(workers));
  }
}
