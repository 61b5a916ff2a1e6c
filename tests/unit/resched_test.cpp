// Tests of the reschedule requests (runtime/resched.*): driven
// single-threaded on synthetic topologies up to 1024 workers, plus one
// multi-threaded run of raises, claims and clears that checks the count,
// and the table of when a spawn asks for one.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "../topologies.hpp"
#include "cpupri.hpp"
#include "resched.hpp"

using urt::detail::resched_requests;

namespace {

constexpr unsigned none = resched_requests::none;

// Raised requests, counted by reading every worker's byte.
unsigned raised(const resched_requests& r) {
  unsigned n = 0;
  for (unsigned w = 0; w < r.worker_count(); ++w) n += r.requested(w) != 0 ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("resched: a request is claimed once, by a worker below it, never by its own worker") {
  for (const auto& shape : urt_test::mechanism_shapes) {
    CAPTURE(shape);
    resched_requests r(urt_test::places(shape));
    const unsigned n = r.worker_count();
    REQUIRE(n == shape.workers);
    CHECK_FALSE(r.pending());
    CHECK(r.claim_above(-1, 0) == none);

    const unsigned w = n - 1;
    r.request(w, 90);
    CHECK(r.pending());
    CHECK(r.requested(w) == 90);
    CHECK(r.claim_above(-1, w) == none);   // its own worker takes it in itself
    CHECK(r.claim_above(90, 0) == none);   // a worker about to run at 90 does not need it
    CHECK(r.claim_above(95, 0) == none);
    CHECK(r.pending());
    CHECK(r.claim_above(89, 0) == w);      // the first worker below it takes it over
    CHECK(r.requested(w) == 0);
    CHECK_FALSE(r.pending());
    CHECK(r.claim_above(-1, 1) == none);   // served once
  }
}

TEST_CASE("resched: requests raise to the most urgent, and the owner's clear serves them") {
  resched_requests r(urt_test::places(urt_test::workers_256));
  r.request(7, 20);
  r.request(7, 80);
  r.request(7, 50);  // a less urgent one does not lower the request
  CHECK(r.requested(7) == 80);
  r.request(200, 10);
  CHECK(raised(r) == 2);
  CHECK(r.pending());
  r.clear(7);
  CHECK(r.requested(7) == 0);
  r.clear(7);  // nothing to clear: the count stays
  CHECK(r.pending());
  CHECK(r.claim_above(10, 3) == none);
  CHECK(r.claim_above(9, 3) == 200);
  CHECK_FALSE(r.pending());
}

TEST_CASE("resched: a claimer scans from its own LLC first, then wraps around") {
  const auto shape = urt_test::workers_256;  // 16 LLCs of 16 workers
  resched_requests r(urt_test::places(shape));
  // One request in LLC 0, one in LLC 5: a worker of LLC 5 serves its own
  // LLC's first, one of LLC 9 wraps around to LLC 0.
  r.request(3, 40);
  r.request(5 * 16 + 2, 40);
  CHECK(r.claim_above(1, 5 * 16 + 9) == 5 * 16 + 2);
  r.request(5 * 16 + 2, 40);
  CHECK(r.claim_above(1, 9 * 16) == 3);
  CHECK(r.claim_above(1, 9 * 16) == 5 * 16 + 2);
  CHECK_FALSE(r.pending());
}

TEST_CASE("resched: concurrent raises, claims and clears keep the count equal to the requests") {
  resched_requests r(urt_test::places(urt_test::several_llcs));  // 8 workers, 2 LLCs
  constexpr int rounds = 20000;
  std::atomic<unsigned> claimed{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const unsigned w = (t * 3 + static_cast<unsigned>(i)) % 8;
        r.request(w, 1 + (i % 99));
        if (i % 3 == 0) r.clear((w + 1) % 8);
        if (r.claim_above(i % 50, t) != none) claimed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(claimed.load() > 0);
  // Quiescent now: the count says pending exactly when a byte is set, the
  // summary's top hides no request from a claimer below it, and claims
  // then empty it one request at a time.
  CHECK(r.pending() == (raised(r) > 0));
  int highest = 0;
  for (unsigned w = 0; w < r.worker_count(); ++w) highest = std::max(highest, r.requested(w));
  for (int level = -1; level < highest; ++level) {
    CAPTURE(level);
    CHECK(r.pending_above(level));
  }
  const unsigned before = raised(r);
  unsigned served = 0;
  for (const unsigned self : {0U, 1U}) {
    while (r.claim_above(-1, self) != none) ++served;
  }
  CHECK(served == before);
  CHECK(raised(r) == 0);
  CHECK_FALSE(r.pending());
}

TEST_CASE("resched: a spawn asks for a request when its worker will be late to it") {
  constexpr int idle = urt::detail::cpupri::level_idle;
  // Busy at a less urgent level: the kernel would preempt it.
  CHECK(resched_requests::wanted(90, 1, false));
  CHECK(resched_requests::wanted(1, 0, false));
  // Busy at the same level or above: the node waits its turn there.
  CHECK_FALSE(resched_requests::wanted(1, 1, false));
  CHECK_FALSE(resched_requests::wanted(50, 80, false));
  // Parked or being woken: its wake-up is slower than a peer's next step.
  CHECK(resched_requests::wanted(90, idle, true));
  CHECK(resched_requests::wanted(1, idle, true));
  // Idle and awake: it takes the node at once.
  CHECK_FALSE(resched_requests::wanted(90, idle, false));
  // A normal task waits for its worker (a request byte of 0 means none).
  CHECK_FALSE(resched_requests::wanted(0, idle, true));
  CHECK_FALSE(resched_requests::wanted(0, idle, false));
}

TEST_CASE("resched: a claimer at or above every request skips the scan, and the summary resets") {
  resched_requests r(urt_test::places(urt_test::several_llcs));  // 8 workers, 2 LLCs
  CHECK_FALSE(r.pending());
  r.request(3, 20);
  r.request(6, 12);
  CHECK(r.pending_above(19));
  CHECK_FALSE(r.pending_above(20));  // nothing above 20 is asked for
  CHECK(r.claim_above(20, 0) == none);
  CHECK(r.requested(3) == 20);  // left for a claimer below it
  CHECK(r.claim_above(15, 0) == 3);
  CHECK(r.claim_above(15, 0) == none);  // 12 is not above 15
  r.clear(6);
  CHECK_FALSE(r.pending());
  // The count reached 0: top starts over, and a low request is not seen
  // as an urgent one.
  r.request(5, 4);
  CHECK(r.pending_above(3));
  CHECK_FALSE(r.pending_above(4));
  // Raising a request counts it once.
  r.request(5, 9);
  r.request(5, 7);  // below what is asked: nothing changes
  CHECK(r.requested(5) == 9);
  CHECK(r.claim_above(8, 0) == 5);
  CHECK_FALSE(r.pending());
}

TEST_CASE("resched: a claimer that scans for nothing lowers a stale top") {
  resched_requests r(urt_test::places(urt_test::several_llcs));  // 8 workers, 2 LLCs
  r.request(3, 90);
  r.request(6, 10);
  CHECK(r.claim_above(50, 0) == 3);
  // Served: top still says 90 though only 10 is asked for.
  CHECK(r.pending_above(50));
  CHECK(r.claim_above(50, 1) == none);  // scans, and lowers top to 10
  CHECK_FALSE(r.pending_above(50));
  CHECK_FALSE(r.pending_above(10));
  CHECK(r.pending_above(9));
  CHECK(r.claim_above(5, 1) == 6);
  CHECK_FALSE(r.pending());
}
