// Tests of the priority-to-worker map (runtime/cpupri.*): find() semantics,
// all layouts against a plain reference model, and invariant 2 under a race.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../topologies.hpp"
#include "cpupri.hpp"
#include "urt/topology.hpp"

using urt::cpupri_layout;
using urt::worker_place;
using urt::worker_set;
using urt::detail::cpupri;
using urt_test::places;

namespace {

constexpr cpupri_layout all_layouts[] = {cpupri_layout::global, cpupri_layout::per_numa,
                                         cpupri_layout::per_llc, cpupri_layout::per_llc_bytes};

// The specification of find(), written as plainly as possible.
struct reference {
  explicit reference(std::vector<worker_place> p)
      : places(std::move(p)), level(places.size(), cpupri::level_invalid) {}

  std::vector<worker_place> places;
  std::vector<int> level;

  unsigned find(int priority, const worker_set* affinity, unsigned from, unsigned last,
                unsigned rotation) const {
    const auto n = static_cast<unsigned>(places.size());
    unsigned groups = 0;
    for (const auto& p : places) groups = std::max(groups, p.llc + 1);
    const auto allowed = [&](unsigned w) {
      return w < n && (affinity == nullptr || affinity->contains(w));
    };
    for (int l = cpupri::level_idle; l < priority; ++l) {
      std::vector<unsigned> c;
      for (unsigned w = 0; w < n; ++w) {
        if (level[w] == l && allowed(w)) c.push_back(w);
      }
      if (c.empty()) continue;
      const auto in_c = [&](unsigned w) { return std::find(c.begin(), c.end(), w) != c.end(); };
      if (in_c(last)) return last;
      if (in_c(from)) return from;
      const unsigned home = from < n ? places[from].llc : rotation % groups;
      unsigned home_numa = 0;
      for (const auto& p : places) {
        if (p.llc == home) {
          home_numa = p.numa;
          break;
        }
      }
      std::vector<unsigned> order{home};
      for (unsigned k = 1; k < groups; ++k) {
        const unsigned g = (home + k) % groups;
        if (numa_of(g) == home_numa) order.push_back(g);
      }
      for (unsigned k = 1; k < groups; ++k) {
        const unsigned g = (home + k) % groups;
        if (numa_of(g) != home_numa) order.push_back(g);
      }
      for (unsigned g : order) {
        std::vector<unsigned> members;  // the LLC's workers, in id order
        for (unsigned w = 0; w < n; ++w) {
          if (places[w].llc == g) members.push_back(w);
        }
        const auto size = static_cast<unsigned>(members.size());
        for (unsigned k = 0; k < size; ++k) {
          const unsigned w = members[(rotation % size + k) % size];
          if (in_c(w)) return w;
        }
      }
    }
    return cpupri::none;
  }

  unsigned numa_of(unsigned llc) const {
    for (const auto& p : places) {
      if (p.llc == llc) return p.numa;
    }
    return 0;
  }
};

}  // namespace

TEST_CASE("cpupri: find picks strictly lower levels, lowest first, then by locality") {
  // 8 workers: 2 NUMA nodes x 2 LLCs x 2 PUs; LLC k = workers 2k, 2k+1.
  const auto p = places(urt_test::two_numa);
  REQUIRE(p.size() == 8);
  for (cpupri_layout layout : all_layouts) {
    CAPTURE(static_cast<int>(layout));
    cpupri cp(layout, p);
    const unsigned none = cpupri::none;
    CHECK(cp.find(50, nullptr, 0, none, 0) == none);  // every worker invalid

    for (unsigned w = 0; w < 8; ++w) cp.set(w, 60);
    CHECK(cp.find(60, nullptr, 0, none, 0) == none);  // equal is not lower
    CHECK(cp.find(61, nullptr, 0, none, 0) == 0);     // the caller itself first
    CHECK(cp.find(61, nullptr, 3, 6, 0) == 6);        // the task's last worker before it

    cp.set(5, 10);
    cp.set(7, cpupri::level_idle);
    CHECK(cp.find(61, nullptr, 5, none, 0) == 7);  // idle beats the caller at 10
    CHECK(cp.find(11, nullptr, 0, none, 0) == 7);
    cp.set(7, 60);
    CHECK(cp.find(61, nullptr, 0, none, 0) == 5);  // lowest non-empty level: 10
    CHECK(cp.find(10, nullptr, 0, none, 0) == none);

    // Locality: caller 0 busy; idle workers in its LLC, its NUMA node, beyond.
    for (unsigned w = 0; w < 8; ++w) cp.set(w, 60);
    cp.set(1, 20);
    cp.set(2, 20);
    cp.set(6, 20);
    CHECK(cp.find(50, nullptr, 0, none, 0) == 1);  // same LLC
    cp.set(1, 60);
    CHECK(cp.find(50, nullptr, 0, none, 0) == 2);  // same NUMA node
    cp.set(2, 60);
    CHECK(cp.find(50, nullptr, 0, none, 0) == 6);  // anywhere

    // Affinity: only workers 4 and 5 allowed.
    const worker_set four_five{4, 5};
    CHECK(cp.find(50, &four_five, 0, none, 0) == none);  // 4 and 5 are at 60
    cp.set(4, 30);
    CHECK(cp.find(50, &four_five, 0, 6, 0) == 4);  // 6 is lower but not allowed

    // Invalid workers are never returned, not even as the task's last worker.
    for (unsigned w = 0; w < 8; ++w) cp.set(w, 90);
    cp.set(6, cpupri::level_invalid);
    CHECK(cp.level(6) == cpupri::level_invalid);
    CHECK(cp.find(90, nullptr, none, 6, 0) == none);
    const unsigned got = cp.find(95, nullptr, none, 6, 0);
    CHECK(got != 6);
    CHECK(got < 8);
  }
}

TEST_CASE("cpupri: rotation spreads placements across a cache") {
  const auto p = places(urt_test::several_llcs);  // 2 LLCs of 4
  REQUIRE(p.size() == 8);
  for (cpupri_layout layout : all_layouts) {
    CAPTURE(static_cast<int>(layout));
    cpupri cp(layout, p);
    for (unsigned w = 0; w < 8; ++w) cp.set(w, cpupri::level_idle);
    cp.set(0, 50);  // the caller is busy
    std::vector<unsigned> seen;
    for (unsigned r = 0; r < 4; ++r) seen.push_back(cp.find(80, nullptr, 0, cpupri::none, r));
    // Rotation r starts the scan at index r of the caller's LLC {0,1,2,3}.
    CHECK(seen == std::vector<unsigned>{1, 1, 2, 3});
    // From outside (no caller) the rotation picks the LLC too.
    CHECK(cp.find(80, nullptr, cpupri::none, cpupri::none, 5) == 5);
  }
}

TEST_CASE("cpupri: shards follow the layout") {
  // One shard, one per NUMA node, one per LLC: 256 workers make 1, 2, 16, 16.
  for (const auto& shape : urt_test::mechanism_shapes) {
    CAPTURE(shape);
    const auto p = places(shape);
    CHECK(cpupri(cpupri_layout::global, p).shard_count() == 1);
    CHECK(cpupri(cpupri_layout::per_numa, p).shard_count() == shape.numa_nodes);
    CHECK(cpupri(cpupri_layout::per_llc, p).shard_count() == shape.llcs);
    CHECK(cpupri(cpupri_layout::per_llc_bytes, p).shard_count() == shape.llcs);
  }
}

TEST_CASE("cpupri: bad layouts and non-contiguous caches are rejected") {
  const auto p = places(urt_test::several_llcs);  // LLC 0 = workers 0-3, LLC 1 = 4-7
  CHECK_THROWS_WITH_AS(cpupri(static_cast<cpupri_layout>(9), p),
                       "runtime_options.cpupri: value 9 is not a cpupri_layout",
                       std::invalid_argument);
  std::vector<worker_place> scrambled = p;
  std::swap(scrambled[1].llc, scrambled[4].llc);  // LLC 0 = workers {0, 2, 3, 4}
  CHECK_THROWS_WITH_AS(cpupri(cpupri_layout::per_llc, scrambled),
                       "cpupri: the workers of LLC 0 are not a contiguous id range",
                       std::invalid_argument);
  CHECK_THROWS_AS(cpupri(cpupri_layout::global, std::vector<worker_place>{}),
                  std::invalid_argument);
}

TEST_CASE("cpupri: every layout matches the reference on random operations") {
  // Topologies up to 1024 workers; LLCs wider than 64 and than 512 bits'
  // worth of words are covered by the 128-wide and single-LLC cases.
  const urt_test::shape topologies[] = {
      urt_test::workers_256, urt_test::wide_llcs, urt_test::uneven,      urt_test::flat_n(7),
      urt_test::two_numa,    urt_test::smt,       urt_test::workers_1024};
  for (const auto& topo : topologies) {
    CAPTURE(topo);
    const auto p = places(topo);
    const auto n = static_cast<unsigned>(p.size());
    for (unsigned seed : {7u, 8u}) {
      std::mt19937 rng(seed);
      reference ref(p);
      std::vector<std::unique_ptr<cpupri>> maps;
      for (cpupri_layout layout : all_layouts) maps.push_back(std::make_unique<cpupri>(layout, p));
      // Levels drawn from a few values so that ties and empty levels both occur.
      const int level_pool[] = {cpupri::level_invalid, cpupri::level_idle, 0, 1, 5, 50, 98, 99};
      // The reference is quadratic in the workers: fewer steps at 1024.
      const int steps = n > 256 ? 1000 : 6000;
      for (int step = 0; step < steps; ++step) {
        if (rng() % 3 != 0) {
          const unsigned w = rng() % n;
          const int level = level_pool[rng() % std::size(level_pool)];
          ref.level[w] = level;
          for (auto& m : maps) m->set(w, level);
          continue;
        }
        worker_set affinity;
        const bool any = rng() % 3 == 0;
        if (!any) {
          const unsigned lo = rng() % n;
          const unsigned hi = lo + rng() % (n - lo);
          for (unsigned w = lo; w <= hi; ++w) {
            if (rng() % 4 != 0) affinity.add(w);
          }
        }
        const int prio = static_cast<int>(rng() % 100);
        const unsigned from = rng() % 5 == 0 ? cpupri::none : rng() % n;
        const unsigned last = rng() % 3 == 0 ? cpupri::none : rng() % n;
        const unsigned rotation = rng();
        const unsigned want = ref.find(prio, any ? nullptr : &affinity, from, last, rotation);
        // find_other(): the reference's answer on the set without `exclude`.
        const unsigned exclude = rng() % 8 == 0 ? cpupri::none : rng() % n;
        worker_set others = any ? worker_set::first_n(n) : affinity;
        if (exclude != cpupri::none) others.remove(exclude);
        const unsigned want_other =
            others.empty() ? cpupri::none
                           : ref.find(prio, &others, cpupri::none, cpupri::none, rotation);
        for (auto& m : maps) {
          CAPTURE(static_cast<int>(m->layout()));
          const unsigned got = m->find(prio, any ? nullptr : &affinity, from, last, rotation);
          REQUIRE(got == want);
          // per_llc_bytes' portable scan, which find() uses without SSE2.
          REQUIRE(m->find_portable(prio, any ? nullptr : &affinity, from, last, rotation) == want);
          CAPTURE(exclude);
          REQUIRE(m->find_other(prio, any ? nullptr : &affinity, exclude, rotation) == want_other);
        }
      }
    }
  }
}

namespace {

// Every layout, and per_llc_bytes' portable scan, give the reference's
// answer for these queries on the current levels.
void check_queries(const reference& ref, const std::vector<std::unique_ptr<cpupri>>& maps,
                   const worker_set* affinity, std::mt19937& rng) {
  const auto n = static_cast<unsigned>(ref.places.size());
  // The first and last worker and a few others as callers and last workers.
  std::vector<unsigned> who{cpupri::none, 0, n - 1, n / 2, static_cast<unsigned>(rng() % n)};
  for (const int prio : {0, 1, 2, 50, 51, 98, 99}) {
    for (const unsigned from : who) {
      for (const unsigned last : {cpupri::none, n - 1, static_cast<unsigned>(rng() % n)}) {
        for (const unsigned rotation : {0u, 1u, 63u, 64u, static_cast<unsigned>(rng())}) {
          const unsigned want = ref.find(prio, affinity, from, last, rotation);
          for (const auto& m : maps) {
            CAPTURE(static_cast<int>(m->layout()));
            CAPTURE(prio);
            CAPTURE(from);
            CAPTURE(last);
            CAPTURE(rotation);
            REQUIRE(m->find(prio, affinity, from, last, rotation) == want);
            REQUIRE(m->find_portable(prio, affinity, from, last, rotation) == want);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("cpupri: find's edge cases match the reference on every layout") {
  // A single LLC of 1024 (16 lines of bytes), LLCs of 50 (not a multiple
  // of 16), of 128, of 5, and 32 LLCs of 32.
  const urt_test::shape one_llc_1024{"one LLC of 1024", "core:512 pu:2", 1024, 1, 1};
  const urt_test::shape topologies[] = {urt_test::workers_1024, urt_test::wide_llcs,
                                        urt_test::wide_odd_llcs, urt_test::uneven,
                                        one_llc_1024, urt_test::flat_n(1)};
  for (const auto& topo : topologies) {
    CAPTURE(topo);
    const auto p = places(topo);
    const auto n = static_cast<unsigned>(p.size());
    std::mt19937 rng(11);
    reference ref(p);
    std::vector<std::unique_ptr<cpupri>> maps;
    for (cpupri_layout layout : all_layouts) maps.push_back(std::make_unique<cpupri>(layout, p));
    const auto set_all = [&](const auto& level_of) {
      for (unsigned w = 0; w < n; ++w) {
        const int level = level_of(w);
        ref.level[w] = level;
        for (auto& m : maps) m->set(w, level);
      }
    };
    // The LLCs as worker ranges, in id order.
    std::vector<std::pair<unsigned, unsigned>> llcs;  // first, count
    for (unsigned w = 0; w < n; ++w) {
      if (w == 0 || p[w].llc != p[w - 1].llc) llcs.emplace_back(w, 0);
      ++llcs.back().second;
    }
    const auto last_llc = llcs.back();

    {
      INFO("all workers in one level");
      for (const int level : {cpupri::level_idle, 0, 1, 50, 98, 99}) {
        CAPTURE(level);
        set_all([&](unsigned) { return level; });
        check_queries(ref, maps, nullptr, rng);
      }
    }
    {
      INFO("one idle worker in the last shard");
      // The rest busy at one level or at random ones, the idle worker first,
      // in the middle or last in the last LLC (for the callers of every
      // other LLC, the last LLC in preference order).
      const unsigned spots[] = {last_llc.first, last_llc.first + last_llc.second / 2, n - 1};
      for (const unsigned idle : spots) {
        for (const bool random_levels : {false, true}) {
          CAPTURE(idle);
          CAPTURE(random_levels);
          set_all([&](unsigned w) {
            if (w == idle) return cpupri::level_idle;
            return random_levels ? static_cast<int>(rng() % 100) : 60;
          });
          check_queries(ref, maps, nullptr, rng);
          worker_set just_idle{idle};
          check_queries(ref, maps, &just_idle, rng);
        }
      }
    }
    {
      INFO("affinities that exclude whole shards");
      // Random levels with a few idle workers, and some LLCs all invalid.
      set_all([&](unsigned w) {
        if (p[w].llc % 7 == 3) return cpupri::level_invalid;
        return rng() % 16 == 0 ? cpupri::level_idle : static_cast<int>(rng() % 100);
      });
      std::vector<worker_set> shapes;
      const auto llc_set = [&](auto keep) {  // the workers of the LLCs `keep` selects
        worker_set s;
        for (unsigned k = 0; k < llcs.size(); ++k) {
          if (!keep(k)) continue;
          for (unsigned w = llcs[k].first; w < llcs[k].first + llcs[k].second; ++w) s.add(w);
        }
        return s;
      };
      shapes.push_back(llc_set([&](unsigned k) { return k == llcs.size() - 1; }));  // last only
      shapes.push_back(llc_set([&](unsigned k) { return k != 0; }));               // all but the first
      shapes.push_back(llc_set([&](unsigned k) { return k % 2 == 1; }));           // every other
      shapes.push_back(llc_set([&](unsigned k) { return p[llcs[k].first].numa != 0; }));
      worker_set ends;  // the last worker of each LLC, and nothing else
      for (const auto& [first, count] : llcs) ends.add(first + count - 1);
      shapes.push_back(ends);
      worker_set sparse;  // one worker of every 17, across LLC boundaries
      for (unsigned w = 5; w < n; w += 17) sparse.add(w);
      shapes.push_back(sparse);
      shapes.push_back(worker_set{});  // nothing at all
      for (const worker_set& affinity : shapes) check_queries(ref, maps, &affinity, rng);
    }
  }
}

TEST_CASE("cpupri: a worker being raised is never invisible to find (invariant 2)") {
  const auto p = places(urt_test::numa_16);  // 16 workers, 4 LLCs
  REQUIRE(p.size() == 16);
  for (cpupri_layout layout : all_layouts) {
    CAPTURE(static_cast<int>(layout));
    cpupri cp(layout, p);
    // Every worker but 5 sits above the searching task's priority (60).
    for (unsigned w = 0; w < 16; ++w) cp.set(w, 90);
    cp.set(5, 1);
    // Odd epoch: worker 5 only rises (1 -> 2 -> ... -> 59); even: it drops
    // back to 1, which a search may legitimately miss.
    std::atomic<unsigned> epoch{1};
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int level = 2; level < 60; ++level) {
          cp.set(5, level);
          // Dwell a little at each level, so that whole searches fit in a
          // raising phase (the dwell is irrelevant to correctness).
          for (int spin = 0; spin < 200; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
        }
        epoch.fetch_add(1, std::memory_order_seq_cst);  // even: lowering
        cp.set(5, 1);
        epoch.fetch_add(1, std::memory_order_seq_cst);  // odd: raising again
      }
    });
    std::size_t checked = 0;
    std::size_t invisible = 0;
    for (int i = 0; i < 400000 && checked < 1000; ++i) {
      const unsigned before = epoch.load(std::memory_order_seq_cst);
      const unsigned got = cp.find(60, nullptr, 12, cpupri::none, static_cast<unsigned>(i));
      const unsigned after = epoch.load(std::memory_order_seq_cst);
      if (before == after && before % 2 == 1) {
        ++checked;
        if (got != 5) ++invisible;
      }
    }
    stop = true;
    writer.join();
    CHECK(checked > 0);
    CHECK(invisible == 0);
  }
}
