// Tests of a worker's remote submission queues (runtime/inbox.hpp), driven
// directly: an urgent node behind thousands of less urgent ones is taken
// first and after at most one batch, or one chunk of a chain's walk, FIFO
// holds within a level across partial takes and walks, a level can be
// taken alone, producers racing the owner lose or repeat nothing, and a
// push that returned is in the owner's reach whatever other pushers do.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "inbox.hpp"
#include "task_node.hpp"

namespace {

using urt::detail::inbox;
using urt::detail::task_node;

std::vector<std::unique_ptr<task_node>> make_nodes(std::size_t n) {
  std::vector<std::unique_ptr<task_node>> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(std::make_unique<task_node>());
  return v;
}

}  // namespace

TEST_CASE("inbox: an urgent node behind thousands is taken first, within one batch") {
  inbox box;
  auto nodes = make_nodes(10'001);
  for (std::size_t i = 0; i < 10'000; ++i) {
    nodes[i]->priority = 1;
    box.push(nodes[i].get());
  }
  nodes[10'000]->priority = 90;
  box.push(nodes[10'000].get());
  std::vector<task_node*> taken;
  const std::size_t n = box.take(inbox::batch, [&](task_node* node) { taken.push_back(node); });
  REQUIRE(n == inbox::batch);
  CHECK(taken.front() == nodes[10'000].get());
  // Then the burst, in order, a batch at a time.
  while (box.pending()) {
    const std::size_t before = taken.size();
    CHECK(box.take(inbox::batch, [&](task_node* node) { taken.push_back(node); }) <= inbox::batch);
    REQUIRE(taken.size() > before);
  }
  REQUIRE(taken.size() == 10'001);
  for (std::size_t i = 0; i < 10'000; ++i) CHECK(taken[i + 1] == nodes[i].get());
}

TEST_CASE("inbox: FIFO within each level across partial takes, most urgent level first") {
  inbox box;
  auto nodes = make_nodes(600);
  std::mt19937 rng(7);
  std::vector<std::vector<task_node*>> by_level(100);
  for (auto& node : nodes) {
    node->priority = static_cast<urt::priority_t>(rng() % 4 == 0 ? 0 : 1 + rng() % 99);
    by_level[static_cast<std::size_t>(node->priority)].push_back(node.get());
    box.push(node.get());
  }
  std::vector<std::vector<task_node*>> seen(100);
  int last_level = 100;
  while (box.pending()) {
    box.take(1 + rng() % 20, [&](task_node* node) {
      CHECK(node->priority <= last_level);  // never a more urgent level after a less urgent one
      last_level = node->priority;
      seen[static_cast<std::size_t>(node->priority)].push_back(node);
    });
  }
  for (std::size_t level = 0; level < 100; ++level) {
    CAPTURE(level);
    CHECK(seen[level] == by_level[level]);
  }
}

TEST_CASE("inbox: take_level_all takes one level whole and leaves the others") {
  inbox box;
  auto nodes = make_nodes(300);
  for (std::size_t i = 0; i < 300; ++i) {
    nodes[i]->priority = static_cast<urt::priority_t>(i % 3 == 0 ? 40 : 10);
    box.push(nodes[i].get());
  }
  std::vector<task_node*> taken;
  CHECK(box.take_level_all(10, [&](task_node* n) { taken.push_back(n); }) == 200);
  for (task_node* n : taken) CHECK(n->priority == 10);
  CHECK(box.take_level_all(10, [&](task_node*) { CHECK(false); }) == 0);
  CHECK(box.pending());
  CHECK(box.take(inbox::unlimited, [](task_node* n) { CHECK(n->priority == 40); }) == 100);
  CHECK_FALSE(box.pending());
}

TEST_CASE("inbox: producers racing the owner's batches lose and repeat nothing") {
  constexpr unsigned producers = 4;
  constexpr std::size_t each = 20'000;
  inbox box;
  std::vector<std::vector<std::unique_ptr<task_node>>> nodes;
  for (unsigned p = 0; p < producers; ++p) nodes.push_back(make_nodes(each));
  // A node's producer and index, for FIFO per producer and level.
  std::vector<std::vector<std::uint32_t>> last(producers, std::vector<std::uint32_t>(100, 0));
  std::atomic<bool> done{false};
  std::vector<std::thread> pool;
  for (unsigned p = 0; p < producers; ++p) {
    pool.emplace_back([&, p] {
      std::mt19937 rng(p);
      for (std::size_t i = 0; i < each; ++i) {
        task_node* n = nodes[p][i].get();
        n->priority = static_cast<urt::priority_t>(rng() % 3 == 0 ? 90 : rng() % 5);
        n->queued_on = p;                             // the producer
        n->release = urt::clock::time_point{std::chrono::nanoseconds{i + 1}};  // its index + 1
        box.push(n);
      }
    });
  }
  std::size_t taken = 0;
  unsigned out_of_order = 0;
  std::thread owner([&] {
    std::mt19937 rng(99);
    const auto take = [&](task_node* n) {
      const auto index = static_cast<std::uint32_t>(n->release.time_since_epoch().count());
      auto& prev = last[n->queued_on][static_cast<std::size_t>(n->priority)];
      if (index <= prev) ++out_of_order;
      prev = index;
      ++taken;
    };
    while (!done.load() || box.pending()) box.take(1 + rng() % 100, take);
  });
  for (auto& t : pool) t.join();
  done.store(true);
  owner.join();
  CHECK(taken == producers * each);
  CHECK(out_of_order == 0);
  CHECK_FALSE(box.pending());
}

TEST_CASE("inbox: levels above the floor take the batch, the others only the trickle") {
  inbox box;
  auto nodes = make_nodes(1002);
  for (std::size_t i = 0; i < 1000; ++i) {
    nodes[i]->priority = 1;
    box.push(nodes[i].get());
  }
  nodes[1000]->priority = 50;
  nodes[1001]->priority = 50;
  box.push(nodes[1000].get());
  box.push(nodes[1001].get());
  // The run queue holds level 1 work already (floor 1): both urgent nodes
  // (above it), and nothing of level 1 this time: the pick changes to 50.
  std::vector<task_node*> taken;
  const auto collect = [&](task_node* n) { taken.push_back(n); };
  CHECK(box.take([] { return 1; }, inbox::batch, inbox::trickle, inbox::unlimited, collect) == 2);
  REQUIRE(taken.size() == 2);
  CHECK(taken[0] == nodes[1000].get());
  CHECK(taken[1] == nodes[1001].get());
  // The next take has nothing above the floor: the trickle of level 1.
  taken.clear();
  CHECK(box.take([] { return 50; }, inbox::batch, inbox::trickle, inbox::unlimited, collect) ==
        inbox::trickle);
  for (std::size_t i = 0; i < inbox::trickle; ++i) CHECK(taken[i] == nodes[i].get());
  // An empty run queue (floor -1): level 1 is above it, a whole batch.
  taken.clear();
  CHECK(box.take([] { return -1; }, inbox::batch, inbox::trickle, inbox::unlimited, collect) ==
        inbox::batch);
  CHECK(taken.front() == nodes[inbox::trickle].get());
  // A floor that rises as nodes are taken: once level 1 is at or below it,
  // the trickle applies.
  int floor = -1;
  taken.clear();
  CHECK(box.take([&] { return floor; }, inbox::batch, inbox::trickle, inbox::unlimited,
                 [&](task_node* n) {
                   collect(n);
                   floor = 1;
                 }) == inbox::batch);  // the batch of the level taken while it was above
}

TEST_CASE("inbox: an unlimited take takes every level, those at or below the floor too") {
  // The budget of the levels at or below the floor is unlimited here: it
  // used to count down after the first such level, and the take then left
  // the next one as a limited take would (a timed node below it stayed).
  inbox box;
  auto nodes = make_nodes(30);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i]->priority = static_cast<urt::priority_t>(i % 3 == 0 ? 80 : i % 3 == 1 ? 40 : 10);
    box.push(nodes[i].get());
  }
  std::size_t taken = 0;
  CHECK(box.take([] { return 50; }, inbox::unlimited, inbox::unlimited, inbox::unlimited,
                 [&](task_node*) { ++taken; }) == 30);
  CHECK(taken == 30);
  CHECK_FALSE(box.pending());
}

TEST_CASE("inbox: urgent nodes at every take still let the trickle through every other take") {
  inbox box;
  auto low = make_nodes(100);
  for (auto& n : low) {
    n->priority = 1;
    box.push(n.get());
  }
  auto urgent = make_nodes(6);
  std::size_t low_taken = 0;
  std::vector<std::size_t> per_take;
  for (auto& u : urgent) {
    u->priority = 60;
    box.push(u.get());
    std::size_t lows = 0;
    bool got_urgent = false;
    box.take([] { return 1; }, inbox::batch, inbox::trickle, inbox::unlimited,
             [&](task_node* n) {
               if (n == u.get()) {
                 got_urgent = true;
               } else {
                 CHECK(n == low[low_taken + lows].get());  // FIFO within level 1
                 ++lows;
               }
             });
    CHECK(got_urgent);  // the urgent node is taken at once, every time
    low_taken += lows;
    per_take.push_back(lows);
  }
  // Left, taken, left, taken, ...: no take leaves the trickle twice in a row.
  CHECK(per_take == std::vector<std::size_t>{0, inbox::trickle, 0, inbox::trickle, 0,
                                             inbox::trickle});
  // Unlimited (stop()'s drain): everything, whatever the previous take did.
  auto last = make_nodes(1);
  last[0]->priority = 60;
  box.push(last[0].get());
  CHECK(box.take([] { return 1; }, inbox::unlimited, inbox::unlimited, inbox::unlimited,
                 [](task_node*) {}) == 1 + low.size() - low_taken);
  CHECK_FALSE(box.pending());
}

TEST_CASE(
    "inbox: a take walks one chunk of a burst, and an urgent node pushed meanwhile goes first") {
  inbox box;
  auto low = make_nodes(10'000);
  for (auto& n : low) {
    n->priority = 1;
    box.push(n.get());
  }
  std::vector<task_node*> taken;
  const auto collect = [&](task_node* n) { taken.push_back(n); };
  const auto step = [&] {
    return box.take([] { return -1; }, inbox::batch, inbox::trickle, inbox::reverse, collect);
  };
  // The burst's chain is taken and its walk begun: no node of it yet, and
  // the owner is told not to pick below level 1.
  CHECK(box.walking_level() == -1);
  CHECK(step() == 0);
  CHECK(box.pending());
  CHECK(box.walking_level() == 1);
  auto urgent = make_nodes(1);
  urgent[0]->priority = 90;
  box.push(urgent[0].get());
  // The next take looks at level 90 first: the urgent node alone (the walk
  // of level 1 goes on with what is left of the chunk, and ends the take).
  CHECK(step() == 1);
  REQUIRE(taken.size() == 1);
  CHECK(taken[0] == urgent[0].get());
  // The rest of the walk, a chunk per take, then the burst in order.
  std::size_t takes = 2;
  while (box.pending()) {
    step();
    ++takes;
    REQUIRE(takes < 10'000);
  }
  // Each take walked at most one chunk: 10,000 nodes need that many takes.
  CHECK(takes >= 10'000 / inbox::reverse);
  CHECK(box.walking_level() == -1);
  REQUIRE(taken.size() == 10'001);
  for (std::size_t i = 0; i < low.size(); ++i) CHECK(taken[i + 1] == low[i].get());
}

TEST_CASE("inbox: a level at or below the floor is walked a trickle per take") {
  // The run queue has work at 50: a burst at 1 is not what the pick needs,
  // so each take walks only a few of its nodes (each a miss the next task
  // would wait for), and the walk does not hold the pick back.
  inbox box;
  auto low = make_nodes(1000);
  for (auto& n : low) {
    n->priority = 1;
    box.push(n.get());
  }
  std::vector<task_node*> taken;
  const auto collect = [&](task_node* n) { taken.push_back(n); };
  std::size_t takes = 0;
  while (taken.empty()) {
    box.take([] { return 50; }, inbox::batch, inbox::trickle, inbox::reverse, collect);
    ++takes;
    REQUIRE(takes <= low.size());
    if (taken.empty()) CHECK(box.walking_level() == 1);  // below the floor: no pick waits
  }
  CHECK(takes >= low.size() / inbox::trickle_walk);
  CHECK(taken.size() == inbox::trickle);
  for (std::size_t i = 0; i < taken.size(); ++i) CHECK(taken[i] == low[i].get());
}

TEST_CASE("inbox: nodes pushed while a chain is walked come after it, in order") {
  inbox box;
  auto first = make_nodes(100);
  auto later = make_nodes(10);
  for (auto& n : first) {
    n->priority = 5;
    box.push(n.get());
  }
  std::vector<task_node*> taken;
  const auto collect = [&](task_node* n) { taken.push_back(n); };
  CHECK(box.take([] { return -1; }, inbox::batch, inbox::trickle, 10, collect) == 0);
  for (auto& n : later) {
    n->priority = 5;
    box.push(n.get());
  }
  while (box.pending()) box.take([] { return -1; }, 3, inbox::trickle, 10, collect);
  REQUIRE(taken.size() == 110);
  for (std::size_t i = 0; i < 100; ++i) CHECK(taken[i] == first[i].get());
  for (std::size_t i = 0; i < 10; ++i) CHECK(taken[100 + i] == later[i].get());
  // take_level_all finishes a walk begun by a take.
  for (auto& n : first) box.push(n.get());
  taken.clear();
  CHECK(box.take([] { return -1; }, inbox::batch, inbox::trickle, 10, collect) == 0);
  CHECK(box.take_level_all(5, collect) == 100);
  for (std::size_t i = 0; i < 100; ++i) CHECK(taken[i] == first[i].get());
  CHECK_FALSE(box.pending());
}

TEST_CASE("inbox: every push that returned before a take began is in its reach") {
  // A pusher preempted inside its push must not hide nodes pushed before
  // or after its own (the wfcqueue urt used before did, between its tail
  // exchange and its link store). Each producer publishes how many of its
  // pushes returned; the owner reads those counts, then takes everything
  // it can: everything counted must have been taken by then.
  constexpr unsigned producers = 4;
  constexpr std::size_t each = 50'000;
  inbox box;
  std::vector<std::vector<std::unique_ptr<task_node>>> nodes;
  for (unsigned p = 0; p < producers; ++p) nodes.push_back(make_nodes(each));
  std::vector<std::atomic<std::size_t>> returned(producers);
  std::vector<std::thread> pool;
  for (unsigned p = 0; p < producers; ++p) {
    pool.emplace_back([&, p] {
      for (std::size_t i = 0; i < each; ++i) {
        task_node* n = nodes[p][i].get();
        n->priority = static_cast<urt::priority_t>(1 + i % 3);
        box.push(n);
        returned[p].store(i + 1, std::memory_order_release);
      }
    });
  }
  std::size_t taken = 0;
  std::size_t short_takes = 0;  // takes that left a returned push behind
  const auto count = [&](task_node*) { ++taken; };
  for (;;) {
    std::size_t seen = 0;
    for (auto& r : returned) seen += r.load(std::memory_order_acquire);
    box.take(inbox::unlimited, count);
    if (taken < seen) ++short_takes;
    if (seen == producers * each && !box.pending()) break;
  }
  for (auto& t : pool) t.join();
  CHECK(short_takes == 0);
  CHECK(taken == producers * each);
}
