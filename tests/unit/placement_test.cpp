// Tests of the placement decision (runtime/placement.hpp's place_on) on a
// synthetic view of the workers: the caller's own CPU's worker is preferred
// only while it is asleep; otherwise an awake worker elsewhere at its
// cpupri level or lower takes the task. Single-threaded: the view's states
// are plain fields.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "../topologies.hpp"
#include "cpupri.hpp"
#include "placement.hpp"

using urt::cpupri_layout;
using urt::worker_set;
using urt::detail::cpupri;
using urt::detail::place_on;
using urt::detail::placement_rotation;

namespace {

enum class state { awake, asleep, rung };

struct view {
  std::vector<state> states;
  [[nodiscard]] std::size_t size() const noexcept { return states.size(); }
  [[nodiscard]] std::uint64_t load(unsigned) const noexcept { return 0; }
  [[nodiscard]] bool parking(unsigned w) const noexcept { return states[w] != state::awake; }
  [[nodiscard]] bool asleep(unsigned w) const noexcept { return states[w] == state::asleep; }
};

constexpr int outside_caller_cpu = 0;                // PU 0 hosts worker 0
const std::vector<unsigned> worker_of_pu = {0, 1, 2, 3};  // PU i -> worker i


// Where an outside thread on CPU 0 places a task of `priority`, for every
// rotation (the answer must not depend on where the scan starts).
std::vector<unsigned> places_from_cpu0(const cpupri& prio, const view& v, int priority,
                                       const worker_set* affinity = nullptr) {
  std::vector<unsigned> got;
  for (unsigned r = 0; r < 8; ++r) {
    placement_rotation rot{r, r};
    got.push_back(place_on(prio, v, worker_of_pu, priority, affinity, cpupri::none,
                           outside_caller_cpu, rot));
  }
  return got;
}

// The same with the caller's CPU unknown: cpupri's plain answer.
std::vector<unsigned> places_plain(const cpupri& prio, const view& v, int priority) {
  std::vector<unsigned> got;
  for (unsigned r = 0; r < 8; ++r) {
    placement_rotation rot{r, r};
    got.push_back(place_on(prio, v, worker_of_pu, priority, nullptr, cpupri::none, -1, rot));
  }
  return got;
}

bool all(const std::vector<unsigned>& got, unsigned w) {
  for (unsigned g : got) {
    if (g != w) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("placement: the caller's CPU-mate worker, not asleep, yields to an awake peer") {
  for (const cpupri_layout layout : {cpupri_layout::global, cpupri_layout::per_llc_bytes}) {
    CAPTURE(static_cast<int>(layout));
    // Four workers in one LLC: 0 and 1 run level-1 tasks, 2 and 3 run
    // above the task's priority (never candidates).
    cpupri prio(layout, urt_test::places(urt_test::flat));
    prio.set(0, 1);
    prio.set(1, 1);
    prio.set(2, 95);
    prio.set(3, 95);
    view v{{state::awake, state::awake, state::awake, state::awake}};
    // Worker 0 shares the caller's CPU and is not running: worker 1 takes it.
    CHECK(all(places_from_cpu0(prio, v, 90), 1));
    // Asleep, worker 0 is woken there (wake-affine) when it is a candidate.
    prio.set(0, cpupri::level_idle);
    v.states[0] = state::asleep;
    CHECK(all(places_from_cpu0(prio, v, 90), 0));
    // Rung and not yet running, worker 0 is no longer preferred, and a
    // peer that is itself being woken (or asleep) is no better than it:
    // cpupri's plain answer, whichever the rotation gives.
    prio.set(0, 1);
    for (const state peer : {state::rung, state::asleep}) {
      v.states[1] = peer;
      for (const state mine : {state::rung, state::awake}) {
        v.states[0] = mine;
        CHECK(places_from_cpu0(prio, v, 90) == places_plain(prio, v, 90));
      }
    }
    v.states[0] = state::awake;
    // The peer runs a higher level than worker 0: worker 0 stays the answer.
    v.states[1] = state::awake;
    prio.set(1, 50);
    CHECK(all(places_from_cpu0(prio, v, 90), 0));
    // Outside the affinity the peer is no alternative.
    prio.set(1, 1);
    const worker_set only0{0};
    CHECK(all(places_from_cpu0(prio, v, 90, &only0), 0));
    // Nobody else below the task's priority: worker 0 it is.
    prio.set(1, 95);
    CHECK(all(places_from_cpu0(prio, v, 90), 0));
  }
}

TEST_CASE("placement: the least-loaded choice takes the caller's CPU-mate last") {
  using urt::detail::caller_cpu_margin;
  // Every worker runs above the task's priority: cpupri finds none, and an
  // outside caller's task goes to the least-loaded worker, not to the one
  // on its CPU (worker 0) while another is within the margin of it.
  struct loaded_view {
    std::vector<std::uint64_t> loads;
    [[nodiscard]] std::size_t size() const noexcept { return loads.size(); }
    [[nodiscard]] std::uint64_t load(unsigned w) const noexcept { return loads[w]; }
    [[nodiscard]] bool parking(unsigned) const noexcept { return false; }
    [[nodiscard]] bool asleep(unsigned) const noexcept { return false; }
  };
  cpupri prio(cpupri_layout::per_llc_bytes, urt_test::places(urt_test::flat));
  for (unsigned w = 0; w < 4; ++w) prio.set(w, 95);
  const auto places = [&](const loaded_view& v, const worker_set* affinity) {
    std::vector<unsigned> got;
    for (unsigned r = 0; r < 8; ++r) {
      placement_rotation rot{r, r};
      got.push_back(
          place_on(prio, v, worker_of_pu, 10, affinity, cpupri::none, outside_caller_cpu, rot));
    }
    return got;
  };
  // Idle by load, worker 0 would win; the least loaded of the others does.
  loaded_view v{{0, 9, 5, 7}};
  CHECK(all(places(v, nullptr), 2));
  // Within the margin: still the others.
  v.loads = {0, caller_cpu_margin, caller_cpu_margin + 3, caller_cpu_margin + 1};
  CHECK(all(places(v, nullptr), 1));
  // Every other one more than the margin above it: worker 0.
  v.loads = {2, caller_cpu_margin + 3, caller_cpu_margin + 5, caller_cpu_margin + 4};
  CHECK(all(places(v, nullptr), 0));
  // Alone in the affinity, worker 0; beside one other, that one.
  v.loads = {0, 9, 5, 7};
  const worker_set only0{0};
  const worker_set zero_three{0, 3};
  CHECK(all(places(v, &only0), 0));
  CHECK(all(places(v, &zero_three), 3));
  // A caller on a CPU with no worker: the plain least-loaded answer.
  placement_rotation rot;
  CHECK(place_on(prio, v, worker_of_pu, 10, nullptr, cpupri::none, 7, rot) == 0);
}

TEST_CASE("placement: a caller on a CPU with no worker, or a task's own spawn, is unchanged") {
  cpupri prio(cpupri_layout::per_llc_bytes, urt_test::places(urt_test::flat));
  prio.set(0, 1);
  prio.set(1, 1);
  prio.set(2, 95);
  prio.set(3, 95);
  const view v{{state::awake, state::awake, state::awake, state::awake}};
  placement_rotation rot;
  // CPU 7 has no worker: the plain cpupri answer, worker 0 or 1.
  const unsigned w = place_on(prio, v, worker_of_pu, 90, nullptr, cpupri::none, 7, rot);
  CHECK(w < 2);
  // A task on worker 0 spawning at a priority above its own stays on
  // worker 0's cpupri rule (its own worker when lower, else a lower one).
  CHECK(place_on(prio, v, worker_of_pu, 90, nullptr, 0, outside_caller_cpu, rot) < 2);
  prio.set(0, 0);
  CHECK(place_on(prio, v, worker_of_pu, 90, nullptr, 0, outside_caller_cpu, rot) == 0);
}

TEST_CASE("placement: a continuation no more urgent than its caller stays on the caller's worker") {
  using urt::detail::no_continuation;
  // Worker 0 runs the caller at 50 and shows 60 (a task at 60 is queued
  // there); workers 1-3 are idle and awake, so any other spawn from it at
  // 60 or below goes elsewhere.
  cpupri prio(cpupri_layout::per_llc_bytes, urt_test::places(urt_test::flat));
  prio.set(0, 60);
  for (unsigned w = 1; w < 4; ++w) prio.set(w, cpupri::level_idle);
  const view v{{state::awake, state::awake, state::awake, state::awake}};
  const worker_set two_three{2, 3};
  const worker_set zero_one{0, 1};
  for (unsigned r = 0; r < 8; ++r) {
    CAPTURE(r);
    placement_rotation rot{r, r};
    // At the caller's priority and below: kept, idle peers or not.
    CHECK(place_on(prio, v, worker_of_pu, 50, nullptr, 0, -1, rot, 50) == 0);
    CHECK(place_on(prio, v, worker_of_pu, 10, nullptr, 0, -1, rot, 50) == 0);
    CHECK(place_on(prio, v, worker_of_pu, 0, nullptr, 0, -1, rot, 50) == 0);
    CHECK(place_on(prio, v, worker_of_pu, 10, &zero_one, 0, -1, rot, 50) == 0);
    // More urgent than the caller: placed as any spawn, on an idle worker.
    CHECK(place_on(prio, v, worker_of_pu, 55, nullptr, 0, -1, rot, 50) != 0);
    // Not a continuation (a post, a dispatch, a spawn): placed.
    CHECK(place_on(prio, v, worker_of_pu, 10, nullptr, 0, -1, rot, no_continuation) != 0);
    CHECK(place_on(prio, v, worker_of_pu, 10, nullptr, 0, -1, rot) != 0);
    // The affinity leaves the caller's worker out: placed within it.
    const unsigned w = place_on(prio, v, worker_of_pu, 10, &two_three, 0, -1, rot, 50);
    CHECK((w == 2 || w == 3));
    // From a thread that is no worker's (no self): nothing to stay on.
    CHECK(place_on(prio, v, worker_of_pu, 10, nullptr, cpupri::none, -1, rot, 50) != 0);
  }
  // The spawn path's `stay` (runtime_spawn.cpp) uses the same rule.
  CHECK(urt::detail::continuation_stays(50, 50));
  CHECK(urt::detail::continuation_stays(0, 1));
  CHECK_FALSE(urt::detail::continuation_stays(51, 50));
  CHECK_FALSE(urt::detail::continuation_stays(10, no_continuation));
}
