// Tests of the stranded-inbox mechanism (runtime/stranded.*) and the
// inbox's take_untimed (runtime/inbox.hpp), driven single-threaded with
// made-up time points on synthetic worker counts, plus one two-thread
// run of the mark/clear pair against a real inbox.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "inbox.hpp"
#include "llc_bytes.hpp"
#include "stranded.hpp"
#include "task_node.hpp"
#include "urt/topology.hpp"

using urt::detail::inbox;
using urt::detail::stranded_marks;
using urt::detail::stranded_watch;
using urt::detail::task_node;
using namespace std::chrono_literals;

namespace {

using tp = urt::clock::time_point;
const tp t0 = tp{} + 1h;
constexpr unsigned none = stranded_marks::none;

std::vector<std::unique_ptr<task_node>> make_nodes(std::initializer_list<int> priorities) {
  std::vector<std::unique_ptr<task_node>> v;
  for (const int p : priorities) {
    v.push_back(std::make_unique<task_node>());
    v.back()->priority = static_cast<urt::priority_t>(p);
  }
  return v;
}

}  // namespace

TEST_CASE("stranded_marks: mark, next with wrap-around, and the owner's clear") {
  for (const unsigned n : {2u, 64u, 65u, 256u, 1024u}) {
    CAPTURE(n);
    stranded_marks m(n);
    CHECK_FALSE(m.any());
    CHECK(m.next(none, 0) == none);
    m.mark(1);
    m.mark(n - 1);
    m.mark(n - 1);  // idempotent
    CHECK(m.any());
    CHECK(m.marked(1));
    CHECK(m.marked(n - 1));
    CHECK_FALSE(m.marked(0));
    if (n > 2) {
      CHECK(m.next(1, 0) == n - 1);     // after 1
      CHECK(m.next(n - 1, 0) == 1);     // wraps around
      CHECK(m.next(none, 1) == n - 1);  // never self
    } else {
      CHECK(m.next(0, 0) == 1);
      CHECK(m.next(1, 1) == none);  // only self is marked
    }
    // The owner counts its points; it clears only with its inbox empty.
    const std::uint64_t before = m.points(1);
    m.point(1, [] { return true; });
    CHECK(m.marked(1));
    CHECK(m.points(1) == before + 1);
    m.point(1, [] { return false; });
    CHECK_FALSE(m.marked(1));
    // A push that lands between the clear and the look after it: the mark
    // is set back.
    m.mark(1);
    int looks = 0;
    m.point(1, [&looks] { return ++looks == 2; });
    CHECK(looks == 2);
    CHECK(m.marked(1));
  }
}

TEST_CASE("stranded_marks: per-LLC lines over a synthetic topology keep every worker's own mark") {
  // 4 LLCs of 20 workers, and a 2-package shape whose LLCs span 80 workers
  // (more than one line each).
  for (const char* shape : {"l3:4 core:20 pu:1", "pack:2 l3:1 core:80 pu:1"}) {
    CAPTURE(shape);
    const urt::topology topo(urt::topology_options{.source = urt::topology_source::synthetic(shape)});
    stranded_marks m(topo.workers());
    const auto n = static_cast<unsigned>(topo.worker_count());
    REQUIRE(m.worker_count() == n);
    const std::vector<unsigned> picked{0, 19, 20, 63, 64, n - 1};
    for (const unsigned w : picked) m.mark(w);
    for (unsigned w = 0; w < n; ++w) {
      CAPTURE(w);
      CHECK(m.marked(w) == (std::find(picked.begin(), picked.end(), w) != picked.end()));
    }
    // next() walks them in id order, wrapping, skipping self.
    unsigned at = none;
    std::vector<unsigned> seen;
    for (std::size_t i = 0; i < picked.size(); ++i) {
      at = m.next(at, 5);
      seen.push_back(at);
    }
    CHECK(seen == picked);
    CHECK(m.next(n - 1, 5) == 0);
    for (const unsigned w : picked) m.point(w, [] { return false; });
    CHECK_FALSE(m.any());
  }
}

TEST_CASE("llc_bytes: used() is exactly each line's workers, and any() sees each worker alone") {
  // LLCs of 20, of 80 (two lines: 64 + 16) and of 70 (64 + 6) workers.
  for (const char* shape : {"l3:4 core:20 pu:1", "pack:2 l3:1 core:80 pu:1", "l3:3 core:35 pu:2"}) {
    CAPTURE(shape);
    const urt::topology topo(urt::topology_options{.source = urt::topology_source::synthetic(shape)});
    const urt::detail::llc_bytes bytes(topo.workers());
    const auto n = topo.worker_count();
    std::vector<std::vector<unsigned>> in_line(bytes.lines());
    for (std::size_t w = 0; w < n; ++w) in_line[bytes.line_of(w)].push_back(bytes.byte_of(w));
    for (std::size_t l = 0; l < bytes.lines(); ++l) {
      CAPTURE(l);
      std::sort(in_line[l].begin(), in_line[l].end());
      REQUIRE(bytes.used(l).size() == in_line[l].size());
      for (std::size_t i = 0; i < in_line[l].size(); ++i) CHECK(in_line[l][i] == i);
      CHECK(bytes.used(l).data() == bytes.line(l).data());
    }
    stranded_marks m(topo.workers());
    for (unsigned w = 0; w < n; ++w) {
      CAPTURE(w);
      m.mark(w);
      CHECK(m.any());
      m.point(w, [] { return false; });
      CHECK_FALSE(m.any());
    }
  }
}

TEST_CASE("stranded_watch: takes a marked worker over only after ipi_timeout without a scheduling point") {
  stranded_marks m(4);
  stranded_watch w(0, 100us);
  // Nothing marked: no plan, no wake-up.
  stranded_watch::plan p = w.before_idle(m, t0);
  CHECK(p.take_over == none);
  CHECK(p.check == tp::max());
  // Worker 2 marked: watched from now; wake at now + ipi_timeout.
  m.mark(2);
  p = w.before_idle(m, t0);
  CHECK(p.take_over == none);
  CHECK(p.check == t0 + 100us);
  p = w.before_idle(m, t0 + 50us);  // woken early for something else
  CHECK(p.take_over == none);
  CHECK(p.check == t0 + 100us);
  // It took a scheduling point meanwhile (still marked: a backlog): the
  // patience starts again.
  m.point(2, [] { return true; });
  p = w.before_idle(m, t0 + 100us);
  CHECK(p.take_over == none);
  CHECK(p.check == t0 + 200us);
  // No point since: taken over; the next take-over of it is ipi_timeout on.
  p = w.before_idle(m, t0 + 200us);
  CHECK(p.take_over == 2);
  p = w.before_idle(m, t0 + 250us);
  CHECK(p.take_over == none);
  CHECK(p.check == t0 + 300us);
  // Its owner empties its inbox: unmarked, nothing to watch.
  m.point(2, [] { return false; });
  p = w.before_idle(m, t0 + 300us);
  CHECK(p.take_over == none);
  CHECK(p.check == tp::max());
  // A worker never watches itself.
  m.mark(0);
  p = w.before_idle(m, t0 + 400us);
  CHECK(p.take_over == none);
  CHECK(p.check == tp::max());
}

TEST_CASE("stranded_watch: with ipi_timeout 0 a stuck worker is taken over at the second look") {
  stranded_marks m(3);
  stranded_watch w(1, 0ns);
  m.mark(0);
  m.mark(2);
  const stranded_watch::plan first = w.before_idle(m, t0);
  CHECK(first.take_over == 2);  // the first marked worker after itself
  const stranded_watch::plan second = w.before_idle(m, t0);
  CHECK(second.take_over == 2);  // still marked, still no point: again
}

TEST_CASE("inbox: take_untimed moves every level most urgent first, FIFO, stopping at a timed node") {
  inbox box;
  auto nodes = make_nodes({10, 90, 10, 10, 50, 90});
  nodes[3]->timed = true;  // the third node at 10: only its owner may take it in
  for (auto& n : nodes) box.push(n.get());
  std::vector<task_node*> taken;
  CHECK(box.take_untimed(-1, [&](task_node* n) { taken.push_back(n); }) == 5);
  CHECK(taken == std::vector<task_node*>{nodes[1].get(), nodes[5].get(), nodes[4].get(),
                                         nodes[0].get(), nodes[2].get()});
  CHECK(box.pending());  // the timed node and the 10s behind it stay
  auto later = make_nodes({10});
  box.push(later[0].get());
  taken.clear();
  CHECK(box.take_untimed(-1, [&](task_node* n) { taken.push_back(n); }) == 0);
  // The owner takes the timed node first, then the rest, in order.
  CHECK(box.take(inbox::unlimited, [&](task_node* n) { taken.push_back(n); }) == 2);
  CHECK(taken == std::vector<task_node*>{nodes[3].get(), later[0].get()});
  CHECK_FALSE(box.pending());
}

TEST_CASE("inbox: take_untimed above a level leaves that level and the lower ones in place") {
  // A reschedule claimer at level 10 takes in only what it could pull.
  inbox box;
  auto nodes = make_nodes({10, 90, 1, 50, 10, 90});
  for (auto& n : nodes) box.push(n.get());
  std::vector<task_node*> taken;
  CHECK(box.take_untimed(10, [&](task_node* n) { taken.push_back(n); }) == 3);
  CHECK(taken == std::vector<task_node*>{nodes[1].get(), nodes[5].get(), nodes[3].get()});
  taken.clear();
  // The owner finds the rest, most urgent level first, FIFO within it.
  CHECK(box.take(inbox::unlimited, [&](task_node* n) { taken.push_back(n); }) == 3);
  CHECK(taken == std::vector<task_node*>{nodes[0].get(), nodes[4].get(), nodes[2].get()});
  CHECK_FALSE(box.pending());
}

TEST_CASE("stranded_marks: a spawner racing the owner's drain never leaves a node unmarked") {
  // The spawner: push, a seq_cst fence (the ring's), mark. The owner:
  // drain, point. Whenever both are done, a node left in the inbox has its
  // worker marked (here the owner stops drawing at random moments: a
  // worker that stops taking scheduling points).
  for (int round = 0; round < 200; ++round) {
    inbox box;
    stranded_marks m(2);
    auto nodes = make_nodes({20, 20, 20, 20, 20, 20, 20, 20});
    std::atomic<bool> go{false};
    std::atomic<int> drained{0};
    std::thread spawner([&] {
      while (!go.load()) {
      }
      for (auto& n : nodes) {
        box.push(n.get());
        // doorbell::ring()'s fence: pairs with the one in point(), as in
        // worker::submit_remote.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        m.mark(1);
      }
    });
    const int points = round % 9;
    go.store(true);
    for (int i = 0; i < points; ++i) {
      drained.fetch_add(static_cast<int>(box.take(inbox::unlimited, [](task_node*) {})));
      m.point(1, [&box] { return box.pending(); });
    }
    spawner.join();
    if (box.pending()) {
      CAPTURE(round);
      CHECK(m.marked(1));
    }
    drained.fetch_add(static_cast<int>(box.take(inbox::unlimited, [](task_node*) {})));
    CHECK(drained.load() == 8);  // every node exactly once
  }
}
