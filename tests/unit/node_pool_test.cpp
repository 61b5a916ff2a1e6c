// Tests of the task node pool (runtime/node_pool.{hpp,cpp}).
#include <doctest/doctest.h>

#include <algorithm>
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
