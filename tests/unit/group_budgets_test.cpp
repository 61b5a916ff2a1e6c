// Tests of one worker's group budgets (runtime/group_budgets.*), driven with
// made-up time points as worker::step() drives them: look() at a scheduling
// point, allowed() filters the pick, picked() says what runs from then on.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "group_budgets.hpp"
#include "task_node.hpp"

using urt::group_budget;
using urt::detail::bandwidth_table;
using urt::detail::group_budgets;
using urt::detail::task_node;
using namespace std::chrono_literals;

namespace {

using tp = urt::clock::time_point;
const tp t0 = tp{} + 1h;

// Groups 0 (default, no budget), 1 (budget 2 ms of 10 ms), 2 (no budget).
std::vector<bandwidth_table::block::group_entry> three_groups() {
  return {{"default", std::nullopt}, {"capped", group_budget{2ms, 10ms}}, {"free", std::nullopt}};
}

task_node node(unsigned group, urt::priority_t priority) {
  task_node n;
  n.group = static_cast<std::uint8_t>(group);
  n.priority = priority;
  return n;
}

std::uint64_t get(const std::atomic<std::uint64_t>& c) { return c.load(); }

// Group 1 (capped) ran its FIFO task from t0 and, at the look at t0 + 3 ms,
// is held until its period ends at t0 + 10 ms; the worker then has nothing
// else to run. Returns group 1's counters.
const urt::detail::bandwidth::counters& held_from_3ms(group_budgets& gb,
                                                      const task_node& capped_fifo) {
  gb.configure(three_groups(), t0);
  gb.picked(&capped_fifo);
  REQUIRE(gb.look(t0 + 3ms));
  gb.picked(nullptr);
  REQUIRE(gb.counters(1) != nullptr);
  return *gb.counters(1);
}

// The block after group 2 got a budget and a fourth group was made, with
// group 1's budget `capped`.
std::vector<bandwidth_table::block::group_entry> four_groups(group_budget capped) {
  return {{"default", std::nullopt},
          {"capped", capped},
          {"free", group_budget{1ms, 10ms}},
          {"new", std::nullopt}};
}

}  // namespace

TEST_CASE("group_budgets: a group's FIFO tasks are held once its runtime is spent, others run") {
  group_budgets gb;
  gb.configure(three_groups(), t0);
  REQUIRE(gb.any());
  CHECK(gb.counters(0) == nullptr);  // no budget: nothing measured
  CHECK(gb.counters(2) == nullptr);
  const task_node capped_fifo = node(1, 50);
  const task_node capped_normal = node(1, urt::priority_normal);
  const task_node free_fifo = node(2, 50);

  tp now = t0;
  CHECK_FALSE(gb.look(now));
  CHECK(gb.allowed(capped_fifo));
  gb.picked(&capped_fifo);
  now += 2500us;  // past its 2 ms: 0.5 ms of overrun by a task picked inside the budget
  CHECK(gb.look(now));
  CHECK(gb.held(1));
  CHECK_FALSE(gb.held(2));
  CHECK_FALSE(gb.allowed(capped_fifo));
  CHECK(gb.allowed(capped_normal));  // normal tasks are never held
  CHECK(gb.allowed(free_fifo));      // another group's budget is its own
  CHECK(gb.next_end() == t0 + 10ms);

  // Its normal task runs while its FIFO is held: a server slice, normal time.
  gb.picked(&capped_normal);
  now += 1ms;
  CHECK(gb.look(now));
  gb.picked(&free_fifo);  // another group's time is idle time for group 1
  now += 3ms;
  CHECK(gb.look(now));
  const auto* c = gb.counters(1);
  REQUIRE(c != nullptr);
  CHECK(get(c->fifo_ns) == 2'500'000);
  CHECK(get(c->normal_ns) == 1'000'000);
  CHECK(get(c->idle_ns) == 3'000'000);
  CHECK(get(c->overrun_ns) == 500'000);
  CHECK(get(c->overrun_events) == 1);
  CHECK(get(c->throttle_events) == 1);
  CHECK(get(c->server_slices) == 1);

  // The period ends: the hold ends there, and the overrun is a debt of the
  // next period, so the group has 1.5 ms left in it.
  now = t0 + 10ms;
  CHECK_FALSE(gb.look(now));
  CHECK(gb.allowed(capped_fifo));
  CHECK(get(c->throttled_ns) == 7'500'000);  // from 2.5 ms to the period's end
  CHECK(gb.next_end() == tp::max());
  gb.picked(&capped_fifo);
  now += 1500us;
  CHECK(gb.look(now));
  CHECK(get(c->throttle_events) == 2);
  CHECK(get(c->overrun_events) == 1);  // it ran exactly to the budget
}

TEST_CASE("group_budgets: a new parameter block drops a group's budget and ends its hold") {
  group_budgets gb;
  gb.configure(three_groups(), t0);
  const task_node capped_fifo = node(1, 50);
  gb.picked(&capped_fifo);
  REQUIRE(gb.look(t0 + 3ms));
  REQUIRE(gb.held(1));
  gb.configure({{"default", std::nullopt}, {"capped", std::nullopt}, {"free", std::nullopt}},
               t0 + 4ms);
  CHECK_FALSE(gb.any());
  CHECK_FALSE(gb.any_held());
  CHECK(gb.allowed(capped_fifo));
  CHECK(gb.counters(1) != nullptr);  // its counters outlive the budget, for stats
}

TEST_CASE("group_budgets: another group's change, or a new group, leaves a budget as it was") {
  group_budgets gb;
  const task_node capped_fifo = node(1, 50);
  const auto* c = &held_from_3ms(gb, capped_fifo);  // 3 ms of its 2 ms
  // Group 2 gets a budget and a fourth group is made (make_group()): a new
  // block, with group 1's budget unchanged.
  gb.configure(four_groups(group_budget{2ms, 10ms}), t0 + 4ms);
  CHECK(gb.held(1));
  CHECK(gb.any_held());
  CHECK(gb.look(t0 + 5ms));
  CHECK(gb.held(1));
  CHECK(gb.next_end() == t0 + 10ms);  // its period goes on
  CHECK(get(c->throttle_events) == 1);
  CHECK(get(c->fifo_ns) == 3'000'000);
  CHECK(get(c->throttled_ns) == 2'000'000);  // counted as it goes: t0 + 3 ms to t0 + 5 ms

  // Its own change does start a new period: the hold ends, counted to then.
  gb.configure(four_groups(group_budget{3ms, 10ms}), t0 + 6ms);
  CHECK_FALSE(gb.held(1));
  CHECK_FALSE(gb.look(t0 + 6ms));
  CHECK(get(c->throttled_ns) == 3'000'000);
  CHECK(gb.next_end() == tp::max());
}

TEST_CASE("group_budgets: a budget removed and given back starts afresh, charged nothing between") {
  group_budgets gb;
  const task_node capped_fifo = node(1, 50);
  const auto* c = &held_from_3ms(gb, capped_fifo);
  // Removed while held: charged and its hold counted up to the removal.
  gb.configure({{"default", std::nullopt}, {"capped", std::nullopt}, {"free", std::nullopt}},
               t0 + 5ms);
  CHECK(get(c->fifo_ns) == 3'000'000);
  CHECK(get(c->throttled_ns) == 2'000'000);
  // Half a second without a budget: nothing is measured, nothing charged.
  gb.configure(three_groups(), t0 + 505ms);
  CHECK_FALSE(gb.held(1));
  CHECK_FALSE(gb.look(t0 + 505ms));
  CHECK(get(c->fifo_ns) == 3'000'000);
  CHECK(get(c->idle_ns) == 2'000'000);  // held, t0 + 3 ms to the removal; not the gap
  CHECK(get(c->throttled_ns) == 2'000'000);
  gb.picked(&capped_fifo);
  CHECK_FALSE(gb.look(t0 + 506ms));  // a fresh period: 1 ms of its 2 ms used
  CHECK(get(c->fifo_ns) == 4'000'000);
  CHECK(gb.next_end() == tp::max());
}

TEST_CASE("group_budgets: release_holds() ends every hold at once, counted") {
  group_budgets gb;
  const task_node capped_fifo = node(1, 50);
  const auto& c = held_from_3ms(gb, capped_fifo);
  gb.release_holds(t0 + 7ms);
  CHECK_FALSE(gb.any_held());
  CHECK_FALSE(gb.held(1));
  CHECK(gb.allowed(capped_fifo));
  CHECK(get(c.throttled_ns) == 4'000'000);
}
