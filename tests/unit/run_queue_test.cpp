// Tests of the per-worker priority array (runtime/run_queue.*).
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "run_queue.hpp"

using urt::detail::rq_link;
using urt::detail::run_queue;

namespace {

struct entry {
  rq_link link;
  int id = 0;
};

entry& of(rq_link* l) { return *reinterpret_cast<entry*>(l); }

std::vector<int> drain(run_queue& rq) {
  std::vector<int> out;
  while (rq_link* l = rq.pop()) out.push_back(of(l).id);
  return out;
}

}  // namespace

TEST_CASE("run_queue: empty queue") {
  run_queue rq;
  CHECK(rq.empty());
  CHECK(rq.size() == 0);
  CHECK(rq.top_level() == -1);
  CHECK(rq.peek() == nullptr);
  CHECK(rq.pop() == nullptr);
}

TEST_CASE("run_queue: FIFO within a level") {
  run_queue rq;
  std::vector<entry> e(10);
  for (int i = 0; i < 10; ++i) {
    e[i].id = i;
    rq.push_back(&e[i].link, 42);
  }
  CHECK(rq.size() == 10);
  CHECK(rq.size_at(42) == 10);
  CHECK(drain(rq) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(rq.empty());
}

TEST_CASE("run_queue: head insertion goes first at its level only") {
  run_queue rq;
  std::vector<entry> e(4);
  for (int i = 0; i < 4; ++i) e[i].id = i;
  rq.push_back(&e[0].link, 10);
  rq.push_back(&e[1].link, 10);
  rq.push_front(&e[2].link, 10);  // a lowered task stays first at its new level
  rq.push_back(&e[3].link, 11);
  CHECK(drain(rq) == std::vector<int>{3, 2, 0, 1});
}

TEST_CASE("run_queue: pick order across all 100 levels") {
  run_queue rq;
  std::vector<entry> e(200);
  // Two entries per level, pushed in a scrambled level order.
  std::vector<int> levels(100);
  for (int i = 0; i < 100; ++i) levels[i] = (i * 37) % 100;
  for (int round = 0; round < 2; ++round) {
    for (int level : levels) {
      entry& x = e[static_cast<std::size_t>(round * 100 + level)];
      x.id = round * 100 + level;
      rq.push_back(&x.link, level);
    }
  }
  for (int level = 99; level >= 0; --level) {
    CAPTURE(level);
    CHECK(rq.top_level() == level);
    CHECK(of(rq.pop()).id == level);        // first pushed at this level
    CHECK(of(rq.pop()).id == 100 + level);  // then the second
  }
  CHECK(rq.empty());
  CHECK(rq.top_level() == -1);
}

TEST_CASE("run_queue: removal from the middle, head and tail") {
  run_queue rq;
  std::vector<entry> e(6);
  for (int i = 0; i < 6; ++i) {
    e[i].id = i;
    rq.push_back(&e[i].link, i < 3 ? 5 : 64);  // levels on both bitmap words
  }
  rq.remove(&e[1].link);  // middle
  rq.remove(&e[3].link);  // head of 64
  rq.remove(&e[5].link);  // tail of 64
  CHECK_FALSE(e[1].link.queued());
  CHECK(rq.size() == 3);
  CHECK(rq.top_level() == 64);
  rq.remove(&e[4].link);  // level 64 now empty: its bit must clear
  CHECK(rq.top_level() == 5);
  CHECK(drain(rq) == std::vector<int>{0, 2});
}

TEST_CASE("run_queue: randomized differential test against a reference model") {
  // The model: one std::deque per level, pick = highest non-empty level.
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    run_queue rq;
    std::vector<std::deque<int>> model(100);
    std::vector<std::unique_ptr<entry>> pool;
    std::vector<entry*> queued;
    std::size_t model_size = 0;
    // A small level range makes ties (FIFO) and empty levels both frequent.
    const int span = seed % 2 == 0 ? 100 : 4;
    const auto model_top = [&model] {
      for (int l = 99; l >= 0; --l) {
        if (!model[static_cast<std::size_t>(l)].empty()) return l;
      }
      return -1;
    };
    for (int step = 0; step < 20000; ++step) {
      const unsigned op = rng() % 10;
      if (op < 4 || queued.empty()) {  // push_back
        auto& x = pool.emplace_back(std::make_unique<entry>());
        x->id = static_cast<int>(pool.size());
        const int level = static_cast<int>(rng() % static_cast<unsigned>(span)) * (100 / span);
        rq.push_back(&x->link, level);
        model[static_cast<std::size_t>(level)].push_back(x->id);
        queued.push_back(x.get());
        ++model_size;
      } else if (op < 5) {  // push_front
        auto& x = pool.emplace_back(std::make_unique<entry>());
        x->id = static_cast<int>(pool.size());
        const int level = static_cast<int>(rng() % static_cast<unsigned>(span)) * (100 / span);
        rq.push_front(&x->link, level);
        model[static_cast<std::size_t>(level)].push_front(x->id);
        queued.push_back(x.get());
        ++model_size;
      } else if (op < 8) {  // pop
        const int top = model_top();
        REQUIRE(rq.top_level() == top);
        rq_link* got = rq.pop();
        REQUIRE(got != nullptr);
        const int want = model[static_cast<std::size_t>(top)].front();
        model[static_cast<std::size_t>(top)].pop_front();
        REQUIRE(of(got).id == want);
        queued.erase(std::find(queued.begin(), queued.end(), &of(got)));
        --model_size;
      } else {  // remove a random queued entry
        const std::size_t i = rng() % queued.size();
        entry* x = queued[i];
        auto& level = model[x->link.level];
        level.erase(std::find(level.begin(), level.end(), x->id));
        rq.remove(&x->link);
        queued.erase(queued.begin() + static_cast<std::ptrdiff_t>(i));
        --model_size;
      }
      REQUIRE(rq.size() == model_size);
      // After every kind of operation, not only before a pop: the queue
      // keeps its top level rather than scanning for it.
      REQUIRE(rq.top_level() == model_top());
    }
    for (int l = 99; l >= 0; --l) {
      for (int id : model[static_cast<std::size_t>(l)]) REQUIRE(of(rq.pop()).id == id);
    }
    CHECK(rq.empty());
  }
}
