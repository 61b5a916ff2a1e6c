// Tests of the overload mask and the push token (runtime/overload.*), driven
// single-threaded on synthetic topologies up to 1024 workers: the mask
// against a plain model, the token never sent to its sender, hops per
// request bounded by the overloaded workers (no storm), restarts, and the
// stuck-hop takeover.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../topologies.hpp"
#include "overload.hpp"
#include "urt/topology.hpp"

using urt::detail::overload_mask;
using urt::detail::push_token;
using urt_test::places;

namespace {

constexpr unsigned none = overload_mask::none;

const urt_test::shape topologies[] = {
    urt_test::flat,     urt_test::smt_llcs, urt_test::workers_256, urt_test::wide_odd_llcs,
    urt_test::two_numa, urt_test::uneven,   urt_test::workers_1024};

// Follows the token from `first` until it rests: every holder forwards at
// once. Returns the holders in order.
std::vector<unsigned> follow(push_token& token, const overload_mask& mask, push_token::hop first) {
  std::vector<unsigned> holders;
  for (push_token::hop h = first; h.target != none;) {
    holders.push_back(h.target);
    REQUIRE(holders.size() <= 4 * mask.worker_count());  // would be a storm
    const unsigned holder = h.target;
    h = token.forward(holder, h.seq, mask, 0);
    CHECK(h.target != holder);  // never to itself
  }
  return holders;
}

}  // namespace

TEST_CASE("overload mask: flags, top priorities and next() match a plain model") {
  for (const auto& topo : topologies) {
    CAPTURE(topo);
    const auto p = places(topo);
    const auto n = static_cast<unsigned>(p.size());
    overload_mask mask(p);
    std::vector<int> model(n, -1);
    std::mt19937 rng(7);
    for (int step = 0; step < 4000; ++step) {
      const unsigned w = rng() % n;
      const int top = static_cast<int>(rng() % 3 == 0 ? -1 : rng() % 100);
      mask.set(w, top);
      model[w] = top;
      if (step % 97 != 0) continue;
      const auto overloaded = static_cast<std::size_t>(
          std::count_if(model.begin(), model.end(), [](int t) { return t >= 0; }));
      CHECK(mask.any() == (overloaded > 0));
      std::vector<unsigned> listed;
      for (unsigned v = mask.next(none); v != none; v = mask.next(v)) listed.push_back(v);
      CHECK(listed.size() == overloaded);
      for (unsigned v : listed) CHECK(model[v] >= 0);
      CHECK(std::is_sorted(listed.begin(), listed.end()));
      for (unsigned v = 0; v < n; ++v) CHECK(mask.top(v) == model[v]);
      // best_above: the most urgent top above a level, never the caller.
      const int level = static_cast<int>(rng() % 101) - 1;
      const unsigned self = rng() % n;
      const unsigned best = mask.best_above(level, self);
      int want = level;
      for (unsigned v = 0; v < n; ++v) {
        if (v != self) want = std::max(want, model[v]);
      }
      if (want == level) {
        CHECK(best == none);
      } else {
        REQUIRE(best != none);
        CHECK(best != self);
        CHECK(model[best] == want);
      }
    }
    // Setting the same value twice does not double-count.
    for (unsigned v = 0; v < n; ++v) mask.set(v, 5);
    for (unsigned v = 0; v < n; ++v) mask.set(v, 5);
    for (unsigned v = 0; v < n; ++v) mask.set(v, -1);
    CHECK_FALSE(mask.any());
    CHECK(mask.next(none) == none);
  }
}

TEST_CASE("push token: one request visits every other overloaded worker once, then rests") {
  for (const auto& topo : topologies) {
    CAPTURE(topo);
    const auto p = places(topo);
    const auto n = static_cast<unsigned>(p.size());
    std::mt19937 rng(11);
    for (int trial = 0; trial < 50; ++trial) {
      overload_mask mask(p);
      push_token token;
      std::set<unsigned> overloaded;
      const unsigned k = 1 + rng() % std::min(n, 20U);
      while (overloaded.size() < k) {
        const unsigned w = rng() % n;
        overloaded.insert(w);
        mask.set(w, static_cast<int>(rng() % 100));
      }
      const unsigned self = rng() % n;  // may itself be overloaded
      const std::vector<unsigned> holders = follow(token, mask, token.request(self, mask, 0));
      std::set<unsigned> expected = overloaded;
      // The requester is not sent the token by itself; later in the round
      // another holder may send it there (it is overloaded too).
      if (self == *overloaded.begin()) expected.erase(self);
      // No storm: the overloaded workers, each once, in id order.
      CHECK(holders == std::vector<unsigned>(expected.begin(), expected.end()));
      CHECK_FALSE(token.travelling());
      // At rest, a request with nobody else overloaded sends nothing.
      if (overloaded == std::set<unsigned>{self}) {
        CHECK(token.request(self, mask, 0).target == none);
      }
    }
  }
}

TEST_CASE("push token: requests while it travels cost one more round, not one token each") {
  for (const auto& shape : {urt_test::workers_256, urt_test::workers_1024}) {
    CAPTURE(shape);
    const auto p = places(shape);
    REQUIRE(p.size() == shape.workers);
    overload_mask mask(p);
    push_token token;
    // The last worker is 255 or 1023.
    const std::vector<unsigned> overloaded{3, 40, 41, 200, shape.workers - 1};
    for (unsigned w : overloaded) mask.set(w, 50);
    push_token::hop h = token.request(7, mask, 0);
    REQUIRE(h.target == 3);
    // While the token travels, 100 more workers request: none starts a token.
    for (unsigned w = 100; w < 200; ++w) CHECK(token.request(w, mask, 0).target == none);
    CHECK(token.holder() == 3);
    std::vector<unsigned> holders;
    while (h.target != none) {
      holders.push_back(h.target);
      const unsigned holder = h.target;
      h = token.forward(holder, h.seq, mask, 0);
      CHECK(h.target != holder);
    }
    // Two rounds: the first for worker 7, one more for all 100 requests.
    std::vector<unsigned> twice = overloaded;
    twice.insert(twice.end(), overloaded.begin(), overloaded.end());
    CHECK(holders == twice);
    CHECK(holders.size() <= 2 * overloaded.size());
  }
}

TEST_CASE("push token: a lone overloaded worker is never sent the token by itself") {
  const auto p = places(urt_test::flat_n(8));
  overload_mask mask(p);
  push_token token;
  mask.set(5, 70);
  // Worker 5 lowering (it still has a pushable task) does not ring itself.
  CHECK(token.request(5, mask, 0).target == none);
  CHECK_FALSE(token.travelling());
  // Another worker's request reaches it; its forward finds nobody but itself.
  const push_token::hop h = token.request(2, mask, 0);
  REQUIRE(h.target == 5);
  CHECK(token.forward(5, h.seq, mask, 0).target == none);
  CHECK_FALSE(token.travelling());
}

TEST_CASE("push token: a hop pending past the timeout is taken over, once") {
  const auto p = places(urt_test::flat_n(8));
  overload_mask mask(p);
  push_token token;
  mask.set(1, 60);
  mask.set(4, 60);
  const std::int64_t timeout = 1000;
  const push_token::hop h = token.request(6, mask, /*now*/ 100);
  REQUIRE(h.target == 1);
  CHECK(token.hop_deadline(timeout) == 1100);
  // Too early: nothing happens.
  CHECK(token.take_over_stuck(6, mask, 1099, timeout).stuck == none);
  // The holder itself never takes over its own hop.
  CHECK(token.take_over_stuck(1, mask, 5000, timeout).stuck == none);
  // Past the deadline: worker 6 takes it over and sends it on to 4.
  const push_token::takeover t = token.take_over_stuck(6, mask, 1100, timeout);
  CHECK(t.stuck == 1);
  CHECK(t.next.target == 4);
  CHECK(token.holder() == 4);
  CHECK(token.hop_deadline(timeout) == 2100);
  // The stuck worker wakes up late: its forward is stale and does nothing.
  CHECK(token.forward(1, h.seq, mask, 1200).target == none);
  CHECK(token.holder() == 4);
  // A second taker finds the new hop young: no double takeover.
  CHECK(token.take_over_stuck(7, mask, 1200, timeout).stuck == none);
  // Worker 4 forwards: nobody after it, no new requests: rest.
  CHECK(token.forward(4, t.next.seq, mask, 1300).target == none);
  CHECK_FALSE(token.travelling());
}

TEST_CASE("push token: the takeover never sends the token to the taker") {
  const auto p = places(urt_test::flat);
  overload_mask mask(p);
  push_token token;
  mask.set(0, 10);
  mask.set(3, 10);  // the taker is overloaded too
  const push_token::hop h = token.request(2, mask, 0);
  REQUIRE(h.target == 0);
  const push_token::takeover t = token.take_over_stuck(3, mask, 10, 5);
  CHECK(t.stuck == 0);
  CHECK(t.next.target == none);  // 3 is next in the mask, but it is the sender
  CHECK_FALSE(token.travelling());
}
