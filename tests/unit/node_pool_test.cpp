// Tests of the task node pool (runtime/node_pool.{hpp,cpp}).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "node_pool.hpp"

namespace pool = urt::detail::node_pool;
using urt::detail::task_node;

TEST_CASE("node_pool: live nodes are distinct and reused after release") {
  std::vector<task_node*> live;
  for (std::size_t i = 0; i < 5 * pool::pool_batch + 3; ++i) live.push_back(pool::allocate());
  std::set<task_node*> unique(live.begin(), live.end());
  CHECK(unique.size() == live.size());
  for (task_node* n : live) pool::release(n);
  // The magazine keeps recently released nodes: the next allocation reuses one.
  task_node* again = pool::allocate();
  CHECK(unique.count(again) == 1);
  CHECK_FALSE(again->rq.queued());
  pool::release(again);
}

TEST_CASE("node_pool: the depot hands out its lowest free nodes, in address order") {
  // Nodes come back in any order (another thread's magazine, a shuffled
  // run order); a thread filling its magazine from the depot still gets the
  // lowest free addresses, ascending, and so consecutive nodes while the
  // free ones are consecutive.
  constexpr std::size_t n = 20 * pool::pool_batch;
  std::vector<task_node*> nodes;
  std::thread([&] {
    for (std::size_t i = 0; i < n; ++i) nodes.push_back(pool::allocate());
  }).join();  // its magazine's leftovers go back at thread exit
  std::vector<task_node*> shuffled = nodes;
  std::mt19937 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  std::thread([&] {
    for (task_node* node : shuffled) pool::release(node);
  }).join();
  // Every node is back in the depot unless an earlier test case in this
  // process left some in this thread's magazine (ctest runs each alone).
  const pool::depot_shape s = pool::shape();
  const bool all_free = s.free_nodes == s.chunks * pool::pool_batch;
  std::vector<task_node*> again;
  std::thread([&] {
    for (std::size_t i = 0; i < 3 * pool::pool_batch; ++i) again.push_back(pool::allocate());
  }).join();
  const task_node* lowest = *std::min_element(nodes.begin(), nodes.end());
  CHECK(again.front() <= lowest);  // no free node is lower than the one handed out first
  for (std::size_t i = 1; i < again.size(); ++i) {
    CAPTURE(i);
    CHECK(again[i - 1] < again[i]);                 // ascending, across batches too
    if (all_free) CHECK(again[i] == again[0] + i);  // and consecutive
  }
  for (task_node* node : again) pool::release(node);
}

TEST_CASE("node_pool: nodes allocated on one thread and released on another") {
  // The producer/consumer pattern of external spawns: nodes flow one way and
  // come back through the depot. Every node handed over must stay unique.
  constexpr std::size_t rounds = 50;
  constexpr std::size_t per_round = 3 * pool::pool_batch + 7;
  std::set<task_node*> ever;
  for (std::size_t r = 0; r < rounds; ++r) {
    std::vector<task_node*> batch;
    for (std::size_t i = 0; i < per_round; ++i) batch.push_back(pool::allocate());
    std::set<task_node*> unique(batch.begin(), batch.end());
    REQUIRE(unique.size() == batch.size());
    ever.insert(batch.begin(), batch.end());
    std::thread consumer([&] {
      for (task_node* n : batch) pool::release(n);
    });
    consumer.join();  // its magazine goes back to the depot at thread exit
  }
  // Recycling bounds the pool: far fewer distinct nodes than allocations.
  CHECK(ever.size() < rounds * per_round / 4);
}

TEST_CASE("node_pool: concurrent allocate and release from many threads") {
  std::vector<std::thread> threads;
  std::vector<std::vector<task_node*>> kept(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<task_node*> mine;
      for (int i = 0; i < 20000; ++i) {
        mine.push_back(pool::allocate());
        if (mine.size() > 300) {
          for (std::size_t k = 0; k < 200; ++k) pool::release(mine[k]);
          mine.erase(mine.begin(), mine.begin() + 200);
        }
      }
      kept[static_cast<std::size_t>(t)] = std::move(mine);
    });
  }
  for (auto& th : threads) th.join();
  std::set<task_node*> all;
  std::size_t total = 0;
  for (auto& v : kept) {
    all.insert(v.begin(), v.end());
    total += v.size();
  }
  CHECK(all.size() == total);  // no node handed to two owners
  for (auto& v : kept) {
    for (task_node* n : v) pool::release(n);
  }
}

namespace {
// A thread_local made before the thread's first allocation, so destroyed
// after the pool's magazine closer: its destructor allocates and releases
// (a per-thread buffer that spawns a flush task at thread exit).
std::vector<task_node*>* exit_kept = nullptr;  // set before the thread starts
struct allocates_at_exit {
  ~allocates_at_exit() {
    std::vector<task_node*> released;
    for (std::size_t i = 0; i < 3 * pool::pool_batch; ++i) {
      task_node* n = pool::allocate();
      (i % 2 == 0 ? *exit_kept : released).push_back(n);
    }
    for (task_node* n : released) pool::release(n);
  }
};
}  // namespace

TEST_CASE("node_pool: a thread_local destructor after the magazine closed gets distinct nodes") {
  // The magazine used to be destroyed with its count left as it was, and
  // the destructor above reused its slots: nodes already given back to the
  // depot, handed out a second time (accepted tasks lost, stop() hung).
  std::vector<task_node*> kept_at_exit;
  exit_kept = &kept_at_exit;
  std::thread t([] {
    thread_local allocates_at_exit late;
    (void)late;
    std::vector<task_node*> mine;
    for (std::size_t i = 0; i < pool::pool_batch + 5; ++i) mine.push_back(pool::allocate());
    for (task_node* n : mine) pool::release(n);  // the magazine holds nodes at exit
  });
  t.join();
  REQUIRE(kept_at_exit.size() == 3 * pool::pool_batch / 2);
  // Everything the depot hands out now must differ from the nodes the
  // exiting thread still holds.
  std::vector<task_node*> now;
  for (std::size_t i = 0; i < 8 * pool::pool_batch; ++i) now.push_back(pool::allocate());
  std::set<task_node*> live(kept_at_exit.begin(), kept_at_exit.end());
  CHECK(live.size() == kept_at_exit.size());
  for (task_node* n : now) CHECK(live.insert(n).second);
  for (task_node* n : now) pool::release(n);
  for (task_node* n : kept_at_exit) pool::release(n);
}

TEST_CASE("node_pool: past pool_cap a node comes from the heap and its release frees it") {
  // The pool keeps what it makes until the process exits, so it stops at
  // pool_cap: a burst bigger than that leaves pool_cap nodes behind, not all.
  constexpr std::size_t beyond = 3 * pool::pool_batch + 5;
  std::vector<task_node*> live;
  live.reserve(pool::pool_cap + beyond);
  for (std::size_t i = 0; i < pool::pool_cap + beyond; ++i) live.push_back(pool::allocate());
  const std::set<task_node*> unique(live.begin(), live.end());
  CHECK(unique.size() == live.size());
  const std::size_t from_heap = static_cast<std::size_t>(
      std::count_if(live.begin(), live.end(), [](const task_node* n) { return !n->pooled; }));
  const pool::depot_shape full = pool::shape();
  CHECK(full.chunks == pool::pool_cap / pool::pool_batch);  // grown to the cap, not past it
  CHECK(full.heap_nodes == from_heap);
  // Every pooled node is live here, unless another thread's magazine of an
  // earlier test case in this process holds some: at least `beyond` came
  // from the heap.
  CHECK(from_heap >= beyond);
  CHECK(live.size() - from_heap <= pool::pool_cap);
  // A heap node is a free node like any other.
  for (const task_node* n : live) {
    if (!n->pooled) REQUIRE_FALSE(n->rq.queued());
  }

  for (task_node* n : live) pool::release(n);
  const pool::depot_shape after = pool::shape();
  CHECK(after.heap_nodes == 0);
  CHECK(after.chunks == full.chunks);
  // The pool's nodes serve the next spawns again: no heap node while they last.
  std::vector<task_node*> again;
  for (std::size_t i = 0; i < 2 * pool::pool_batch; ++i) again.push_back(pool::allocate());
  CHECK(std::none_of(again.begin(), again.end(), [](const task_node* n) { return !n->pooled; }));
  CHECK(pool::shape().heap_nodes == 0);
  for (task_node* n : again) pool::release(n);
}
