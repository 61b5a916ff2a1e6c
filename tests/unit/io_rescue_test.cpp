// Tests of the reactor rescue (runtime/io_rescue.*): the lease between an
// owner and its rescuers, and the idle worker's watch, driven
// single-threaded over made-up peers and time points, up to 256 workers;
// plus one run of an owner and two rescuers sharing a real io_context.
#include <doctest/doctest.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "io_rescue.hpp"

using urt::detail::io_lease;
using urt::detail::io_peers;
using urt::detail::io_watch;
using namespace std::chrono_literals;

namespace {

using tp = urt::clock::time_point;
const tp t0 = tp{} + 1h;
constexpr unsigned none = io_watch::none;

// Made-up workers: who has I/O outstanding and is awake, when each looked
// last, and the rescues asked of them.
struct fake_peers final : io_peers {
  explicit fake_peers(unsigned n) : states(n), rescues(n, 0) {
    for (state& s : states) s.last_look = t0;
  }
  unsigned worker_count() const noexcept override { return static_cast<unsigned>(states.size()); }
  state look(unsigned w) const noexcept override {
    ++looks;
    return states[w];
  }
  std::size_t rescue(unsigned w) override { return ++rescues[w]; }
  void stuck(unsigned w, tp since) {
    states[w].candidate = true;
    states[w].last_look = since;
  }

  std::vector<state> states;
  std::vector<std::size_t> rescues;
  mutable unsigned looks = 0;
};

}  // namespace

TEST_CASE("io_lease: polls share it, the owner's parked wait excludes them, looks are published") {
  io_lease l;
  CHECK(l.try_share());  // the owner's poll
  CHECK(l.try_share());  // a rescuer's, at the same time
  l.unshare();
  l.unshare();
  l.lock();  // nobody inside: at once
  CHECK_FALSE(l.try_share());  // no rescuer while the owner is parked in it
  l.looked(t0 + 5us);
  l.unlock();
  CHECK(l.last_look() == t0 + 5us);
  {
    const io_lease::exclusive hold(l);
    CHECK_FALSE(l.try_share());
  }
  REQUIRE(l.try_share());
  { const io_lease::shared hold(l); }
  // The owner's lock waits for a poll inside to end.
  REQUIRE(l.try_share());
  std::atomic<bool> locked{false};
  std::thread owner([&] {
    l.lock();
    locked.store(true);
    l.unlock();
  });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(locked.load());  // still waiting (it cannot get in before unshare)
  l.unshare();
  owner.join();
  CHECK(locked.load());
  CHECK(l.try_share());
  l.unshare();
}

TEST_CASE("io_watch: nobody with I/O, or everybody fresh, or parked: nothing to do") {
  for (const unsigned n : {1u, 2u, 9u, 256u}) {
    CAPTURE(n);
    fake_peers peers(n);
    io_watch watch(0, 110us, 10us);
    int clock_reads = 0;
    io_watch::plan p = watch.before_idle(peers, [&] {
      ++clock_reads;
      return t0 + 1s;
    });
    CHECK(p.rescue == none);
    CHECK(p.check == tp::max());
    CHECK(clock_reads == 0);  // no peer with I/O: no clock read
    if (n < 2) continue;
    // Awake with I/O and fresh: not yet; wake when it would be stale.
    peers.stuck(1, t0 + 1s - 10us);
    io_watch fresh(0, 110us, 10us);
    p = fresh.before_idle(peers, t0 + 1s);
    CHECK(p.rescue == none);
    CHECK(p.check == t0 + 1s + 100us);
    // Parked (not a candidate) however old its look: the kernel wakes it.
    peers.states[1].candidate = false;
    peers.states[1].last_look = t0;
    io_watch parked(0, 110us, 10us);
    p = parked.before_idle(peers, t0 + 1s);
    CHECK(p.rescue == none);
    CHECK(p.check == tp::max());
  }
}

TEST_CASE("io_watch: a stale worker is rescued, and again at every look while it stays so") {
  fake_peers peers(4);
  io_watch watch(0, 110us, 10us);
  peers.stuck(2, t0);
  io_watch::plan p = watch.before_idle(peers, t0 + 109us);
  CHECK(p.rescue == none);
  CHECK(p.check == t0 + 110us);  // the parker wakes it then
  p = watch.before_idle(peers, t0 + 110us);
  CHECK(p.rescue == 2);
  CHECK(p.check == t0 + 120us);  // and looks again one poll interval later
  for (int i = 1; i <= 5; ++i) {
    p = watch.before_idle(peers, t0 + 120us + i * 10us);
    CHECK(p.rescue == 2);
  }
  // It looked itself: fresh again, left alone until it is stale again.
  peers.states[2].last_look = t0 + 200us;
  p = watch.before_idle(peers, t0 + 205us);
  CHECK(p.rescue == none);
  CHECK(p.check == t0 + 310us);
  // Never itself, even when its own state looks stale.
  io_watch self(2, 110us, 10us);
  peers.stuck(2, t0);
  for (unsigned w : {0u, 1u, 3u}) peers.states[w].candidate = false;
  CHECK(self.before_idle(peers, t0 + 1s).rescue == none);
}

TEST_CASE("io_watch: at 256 workers one look costs at most span peers and covers everyone in turn") {
  const unsigned n = 256;
  fake_peers peers(n);
  io_watch watch(17, 110us, 10us);
  peers.stuck(200, t0);
  unsigned passes = 0;
  io_watch::plan p;
  do {
    peers.looks = 0;
    p = watch.before_idle(peers, t0 + 1ms);
    CHECK(peers.looks <= io_watch::default_span);
    ++passes;
  } while (p.rescue == none && passes <= n);
  CHECK(p.rescue == 200);
  CHECK(passes <= n / io_watch::default_span + 1);
  // A second stale worker is found once the first looks again.
  peers.stuck(5, t0);
  peers.states[200].last_look = t0 + 1ms;
  passes = 0;
  do {
    p = watch.before_idle(peers, t0 + 1ms);
    ++passes;
  } while (p.rescue == none && passes <= n);
  CHECK(p.rescue == 5);
}

TEST_CASE("io_watch: deadlines near the clock's end saturate") {
  fake_peers peers(2);
  io_watch watch(0, 1s, 1s);
  peers.stuck(1, tp::max() - 1ms);
  const io_watch::plan p = watch.before_idle(peers, tp::max() - 2ms);
  CHECK(p.rescue == none);
  CHECK(p.check == tp::max());
}

TEST_CASE("io_watch: a busy worker looks every half patience, at busy_span peers, and rescues") {
  fake_peers peers(4);
  io_watch watch(0, 110us, 10us);
  peers.stuck(2, t0);
  // The first look is due at once; peer 2 is not stale yet.
  io_watch::plan p = watch.while_busy(peers, t0 + 100us);
  CHECK(p.rescue == none);
  CHECK(peers.looks <= io_watch::busy_span);
  // Its next look waits half the patience (55 us), whatever the peers do.
  peers.looks = 0;
  CHECK(watch.while_busy(peers, t0 + 110us).rescue == none);
  CHECK(watch.while_busy(peers, t0 + 154us).rescue == none);
  CHECK(peers.looks == 0);
  // Then it finds the stale peer within its span's turns and names it.
  unsigned looks_taken = 0;
  tp now = t0 + 155us;
  do {
    p = watch.while_busy(peers, now);
    ++looks_taken;
    now += 55us;
  } while (p.rescue == none && looks_taken < 4);
  CHECK(p.rescue == 2);
  CHECK(looks_taken <= 2);  // 3 peers, 2 per look
  // A peer that looked itself since is left alone until it is stale again.
  peers.states[2].last_look = now;
  CHECK(watch.while_busy(peers, now).rescue == none);
  CHECK(watch.while_busy(peers, now + 55us).rescue == none);
  p = watch.while_busy(peers, now + 110us);
  if (p.rescue == none) p = watch.while_busy(peers, now + 165us);  // the cursor went past it
  CHECK(p.rescue == 2);
  // The idle and the busy look share the cursor and the verdicts.
  peers.states[2].candidate = false;  // parked now
  peers.stuck(3, t0);
  CHECK(watch.before_idle(peers, now + 1s).rescue == 3);
}

TEST_CASE("io_watch: at 256 workers a busy look costs at most busy_span peers, covers all") {
  const unsigned n = 256;
  fake_peers peers(n);
  io_watch watch(17, 110us, 10us);
  peers.stuck(16, t0);  // the last one a look from 17 reaches
  tp now = t0 + 1ms;
  unsigned passes = 0;
  io_watch::plan p;
  do {
    peers.looks = 0;
    p = watch.while_busy(peers, now);
    CHECK(peers.looks <= io_watch::busy_span);
    now += 55us;
    ++passes;
  } while (p.rescue == none && passes <= n);
  CHECK(p.rescue == 16);
  CHECK(passes <= (n - 1) / io_watch::busy_span + 1);
}

TEST_CASE("io_watch: a busy look's next time saturates at the clock's end") {
  fake_peers peers(2);
  io_watch watch(0, 1s, 1s);
  peers.stuck(1, tp::max() - 3s);
  const io_watch::plan p = watch.while_busy(peers, tp::max() - 1ms);
  CHECK(p.rescue == 1);
  CHECK(p.check == tp::max());  // the recheck a second later saturates too
  // Due again at max() only: nothing looks before then.
  peers.looks = 0;
  CHECK(watch.while_busy(peers, tp::max() - 1us).rescue == none);
  CHECK(peers.looks == 0);
}

TEST_CASE("io_lease: no poll runs inside the owner's exclusive hold") {
  // Two rescuers poll whenever they may; the owner alternates polls
  // (shared) and exclusive holds in which it runs the context itself.
  // Handlers record whether they ran inside an exclusive hold on another
  // thread.
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);  // a poll that empties it must not stop it
  io_lease lease;
  std::atomic<bool> owner_exclusive{false};
  std::atomic<std::thread::id> exclusive_thread{};
  std::atomic<int> violations{0};
  std::atomic<int> ran{0};
  std::atomic<bool> done{false};
  const auto handler = [&] {
    if (owner_exclusive.load() && exclusive_thread.load() != std::this_thread::get_id()) {
      violations.fetch_add(1);
    }
    ran.fetch_add(1);
  };
  constexpr int rounds = 20000;
  const auto rescue = [&] {
    while (!done.load()) {
      if (!lease.try_share()) continue;
      const io_lease::shared hold(lease);
      io.poll();
    }
  };
  std::thread r1(rescue);
  std::thread r2(rescue);
  for (int i = 0; i < rounds; ++i) {
    asio::post(io, handler);
    if (i % 2 == 0) {
      REQUIRE(lease.try_share());  // the owner's poll always gets in
      const io_lease::shared hold(lease);
      io.poll();
    } else {
      const io_lease::exclusive hold(lease);
      exclusive_thread.store(std::this_thread::get_id());
      owner_exclusive.store(true);
      io.poll();
      owner_exclusive.store(false);
      lease.looked(urt::clock::now());
    }
  }
  done.store(true);
  r1.join();
  r2.join();
  io.poll();
  CHECK(violations.load() == 0);
  CHECK(ran.load() == rounds);
  guard.reset();
}
