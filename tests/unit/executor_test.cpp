// Tests of urt::executor (include/urt/executor.hpp) and worker-owned I/O
// (runtime/io_poller.hpp): post / dispatch / defer / co_spawn run at the
// executor's priority on an allowed worker, dispatch runs inline only from
// a matching task, coroutines keep their priority across co_await (also
// through urt::any_executor), completions run on the worker owning the
// socket, in strict priority order with the worker's other tasks, and a
// long task's preempt points see them; use_future, yield, equality and
// every bad input. Ordered by events, never by time.
// Asio before doctest and the standard headers, as in the library's own
// files (runtime/runtime.cpp says why).
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/defer.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_future.hpp>
#include <asio/write.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../topologies.hpp"
#include "urt/executor.hpp"
#include "urt/urt.hpp"

using namespace std::chrono_literals;

namespace {

struct seen {
  int priority = -1;
  unsigned worker = ~0U;
};

seen here() { return {urt::this_task::priority(), urt::this_task::worker_id()}; }

}  // namespace

TEST_CASE("executor: post, dispatch, defer and bind_executor run at its priority on an allowed worker") {
  urt::runtime rt(urt_test::synthetic_workers(4));
  const urt::executor ex = rt.executor({.priority = 80, .affinity = urt::worker_set{2, 3}});
  CHECK(asio::query(ex, urt::priority) == 80);
  CHECK(ex.home_worker() == 2);
  std::promise<seen> a, b, c, d;
  asio::post(ex, [&] { a.set_value(here()); });
  asio::dispatch(ex, [&] { b.set_value(here()); });  // from outside: spawned
  asio::defer(ex, [&] { c.set_value(here()); });
  asio::post(asio::bind_executor(ex, [&] { d.set_value(here()); }));
  for (auto* p : {&a, &b, &c, &d}) {
    const seen s = p->get_future().get();
    CHECK(s.priority == 80);
    CHECK((s.worker == 2 || s.worker == 3));
  }
  const urt::executor low = asio::require(ex, urt::priority(5));
  CHECK(asio::query(low, urt::priority) == 5);
  CHECK(asio::query(ex, urt::priority) == 80);  // require copies
  std::promise<seen> e;
  asio::post(low, [&] { e.set_value(here()); });
  CHECK(e.get_future().get().priority == 5);
}

TEST_CASE("executor: defer from a task queues on the caller's worker, post goes where placement says") {
  // No migration: nothing moves a task after it was queued, so where each
  // ran is where it was put.
  urt::runtime_options o = urt_test::synthetic_workers(2);
  o.migration = urt::migration_mode::none;
  urt::runtime rt(o);
  const urt::executor at10 = rt.executor({.priority = 10});
  const urt::executor at10_on1 = rt.executor({.priority = 10, .affinity = urt::worker_set{1}});
  const urt::executor at90 = rt.executor({.priority = 90});
  std::promise<seen> deferred, posted, deferred_elsewhere, deferred_urgent, deferred_outside;
  rt.spawn({.priority = 80, .affinity = urt::worker_set{0}}, [&] {
    asio::defer(at10, [&] { deferred.set_value(here()); });
    // Worker 1 is idle, below 10: placement puts the task there.
    asio::post(at10, [&] { posted.set_value(here()); });
    // The caller's worker is outside the affinity: placed as a post.
    asio::defer(at10_on1, [&] { deferred_elsewhere.set_value(here()); });
  });
  const seen d = deferred.get_future().get();
  CHECK(d.priority == 10);
  CHECK(d.worker == 0);
  CHECK(posted.get_future().get().worker == 1);
  CHECK(deferred_elsewhere.get_future().get().worker == 1);
  // More urgent than the caller: placed, to start now on the idle worker.
  rt.spawn({.priority = 80, .affinity = urt::worker_set{0}},
           [&] { asio::defer(at90, [&] { deferred_urgent.set_value(here()); }); });
  const seen u = deferred_urgent.get_future().get();
  CHECK(u.priority == 90);
  CHECK(u.worker == 1);
  // From outside any task: placed as a post (no worker to stay on).
  asio::defer(at10_on1, [&] { deferred_outside.set_value(here()); });
  CHECK(deferred_outside.get_future().get().worker == 1);
}

TEST_CASE("executor: dispatch runs inline only from a task of the same priority, worker set and group") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  const urt::executor at40 = rt.executor({.priority = 40});
  const urt::executor at41 = asio::require(at40, urt::priority(41));
  const urt::executor on1 = rt.executor({.priority = 40, .affinity = urt::worker_set{1}});
  std::promise<std::vector<bool>> result;
  // A handler ran inline when it ran on the calling thread during the
  // dispatch call; state outside the task, since spawned ones run after it.
  std::atomic<std::thread::id> caller{};
  std::atomic<bool> dispatching{false};
  std::atomic<int> ran{0}, ran_inline{0};
  const auto handler = [&] {
    ran.fetch_add(1);
    if (dispatching.load() && std::this_thread::get_id() == caller.load()) ran_inline.fetch_add(1);
  };
  rt.spawn({.priority = 40, .affinity = urt::worker_set{0}}, [&] {
    caller.store(std::this_thread::get_id());
    std::vector<bool> inline_ran;
    for (const urt::executor* ex : {&at40, &at41, &on1}) {
      const int before = ran_inline.load();
      dispatching.store(true);
      asio::dispatch(*ex, handler);
      dispatching.store(false);
      inline_ran.push_back(ran_inline.load() != before);
    }
    result.set_value(inline_ran);
  });
  const std::vector<bool> r = result.get_future().get();
  REQUIRE(r.size() == 3);
  CHECK(r[0]);        // same priority, any worker: inline
  CHECK_FALSE(r[1]);  // another priority: spawned
  CHECK_FALSE(r[2]);  // a worker set without this worker: spawned
  // From outside any task: never inline.
  std::promise<std::thread::id> outside;
  asio::dispatch(at40, [&] { outside.set_value(std::this_thread::get_id()); });
  CHECK(outside.get_future().get() != std::this_thread::get_id());
  rt.stop();
  CHECK(ran.load() == 3);  // each ran once
}

TEST_CASE("executor: coroutines keep the priority across co_await, also through urt::any_executor") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  const urt::executor ex = rt.executor({.priority = 70});
  auto direct = [&]() -> urt::awaitable<std::vector<int>> {
    std::vector<int> levels{urt::this_task::priority()};
    urt::net::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 3; ++i) {
      t.expires_after(100us);
      co_await t.async_wait(urt::use_awaitable);
      levels.push_back(urt::this_task::priority());
      co_await urt::yield();
      levels.push_back(urt::this_task::priority());
    }
    co_return levels;
  };
  for (int v : asio::co_spawn(ex, direct, asio::use_future).get()) CHECK(v == 70);

  const urt::any_executor erased(asio::require(ex, urt::priority(30)));
  CHECK(asio::query(erased, urt::priority) == 30);
  auto through_any = [&]() -> asio::awaitable<std::vector<int>, urt::any_executor> {
    std::vector<int> levels{urt::this_task::priority()};
    for (int i = 0; i < 3; ++i) {
      co_await asio::post(asio::use_awaitable_t<urt::any_executor>{});
      levels.push_back(urt::this_task::priority());
    }
    co_return levels;
  };
  for (int v : asio::co_spawn(erased, through_any, asio::use_future).get()) CHECK(v == 30);
}

TEST_CASE("executor: co_spawn with use_future delivers values and exceptions") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  const urt::executor ex = rt.executor({.priority = 10});
  auto value = []() -> urt::awaitable<int> { co_return 42; };
  CHECK(asio::co_spawn(ex, value, asio::use_future).get() == 42);
  auto fails = []() -> urt::awaitable<int> {
    throw std::runtime_error("from the coroutine");
    co_return 0;
  };
  std::future<int> f = asio::co_spawn(ex, fails, asio::use_future);
  CHECK_THROWS_WITH_AS(f.get(), "from the coroutine", std::runtime_error);
}

TEST_CASE("executor: co_await urt::yield() lets a queued more urgent task run first") {
  urt::runtime rt(urt_test::synthetic_workers(1));
  const urt::executor ex = rt.executor({.priority = 20});
  std::mutex m;
  std::vector<std::string> order;
  const auto log = [&](std::string s) {
    std::lock_guard lock(m);
    order.push_back(std::move(s));
  };
  auto coro = [&]() -> urt::awaitable<void> {
    log("before");
    // Queued behind this running task: a more urgent one and an equal one.
    rt.spawn({.priority = 60}, [&] { log("urgent"); });
    rt.spawn({.priority = 20}, [&] { log("equal"); });
    co_await urt::yield();
    log("after");
  };
  asio::co_spawn(ex, coro, asio::use_future).get();
  rt.stop();
  CHECK(order == std::vector<std::string>{"before", "urgent", "equal", "after"});
}

TEST_CASE("executor: co_await urt::yield() with nothing queued resumes on the same worker") {
  // Worker 1 is idle, below the coroutine: a post from the coroutine would
  // be placed there. A yield is a continuation and stays. No migration:
  // nothing moves a task after it was queued.
  urt::runtime_options o = urt_test::synthetic_workers(2);
  o.migration = urt::migration_mode::none;
  urt::runtime rt(o);
  const urt::executor ex = rt.executor({.priority = 20});
  auto coro = [&]() -> urt::awaitable<std::vector<unsigned>> {
    std::vector<unsigned> where{urt::this_task::worker_id()};
    for (int i = 0; i < 50; ++i) {
      co_await urt::yield();
      where.push_back(urt::this_task::worker_id());
    }
    co_return where;
  };
  const std::vector<unsigned> where = asio::co_spawn(ex, coro, asio::use_future).get();
  REQUIRE(where.size() == 51);
  CHECK(std::count(where.begin(), where.end(), where.front()) == 51);
}

TEST_CASE("executor: a socket's completion handler runs on the worker that owns it") {
  urt::runtime rt(urt_test::synthetic_workers(3));
  const urt::executor on2 = rt.executor({.priority = 50, .affinity = urt::worker_set{2}});
  urt::net::tcp_acceptor acceptor(on2, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = acceptor.local_endpoint().port();
  std::promise<std::vector<seen>> got;
  auto server = [&]() -> urt::awaitable<void> {
    std::vector<seen> where{here()};
    urt::net::tcp_socket s = co_await acceptor.async_accept(urt::use_awaitable);
    where.push_back(here());
    char buf[5];
    co_await asio::async_read(s, asio::buffer(buf), urt::use_awaitable);
    where.push_back(here());
    co_await asio::async_write(s, asio::buffer(buf), urt::use_awaitable);
    where.push_back(here());
    got.set_value(where);
  };
  asio::co_spawn(on2, server, asio::detached);
  asio::io_context client_io;
  asio::ip::tcp::socket client(client_io);
  client.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(client, asio::buffer("hello", 5));
  char echoed[5];
  asio::read(client, asio::buffer(echoed));
  CHECK(std::string(echoed, 5) == "hello");
  for (const seen& s : got.get_future().get()) {
    CHECK(s.worker == 2);
    CHECK(s.priority == 50);
  }
  CHECK(rt.stats().workers[2].io_handlers >= 3);
}

TEST_CASE("executor: I/O started from outside on a parked worker with none completes there") {
  // With no I/O outstanding a worker parks on its doorbell's futex, where
  // no completion reaches it (runtime/doorbell.hpp). Starting an operation
  // from another thread must ring it so that it parks in its reactor:
  // without that ring this completion would wait for the next spawn.
  urt::runtime rt(urt_test::synthetic_workers(1));
  const urt::executor ex = rt.executor({.priority = 40});
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    // Parked: it has run a task since the count was read, then gone back
    // to sleep.
    const std::uint64_t parks = rt.stats().workers[0].parks;
    rt.spawn({.priority = 40}, [] {});
    while (rt.stats().workers[0].parks == parks) std::this_thread::sleep_for(1ms);
    urt::net::steady_timer t(ex);
    t.expires_after(round % 2 == 0 ? 0ms : 2ms);
    std::promise<seen> ran;
    t.async_wait([&](const std::error_code& ec) {
      CHECK_FALSE(ec);
      ran.set_value(here());
    });
    // Generous: it either completes within milliseconds or never does.
    auto f = ran.get_future();
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    const seen s = f.get();
    CHECK(s.worker == 0);
    CHECK(s.priority == 40);
  }
}

TEST_CASE("executor: with the worker held busy, completions and spawns queued meanwhile run by priority") {
  urt::runtime rt(urt_test::synthetic_workers(1));
  std::mutex m;
  std::vector<int> order;
  const auto log = [&](int p) {
    std::lock_guard lock(m);
    order.push_back(p);
  };
  urt::net::steady_timer t10(rt.executor({.priority = 10}));
  urt::net::steady_timer t30(rt.executor({.priority = 30}));
  urt::net::steady_timer t50(rt.executor({.priority = 50}));
  urt_test::worker_0_hold h;
  h.occupy(rt);
  for (auto* t : {&t10, &t30, &t50}) {
    t->expires_after(0s);  // due at once: each completion waits for the worker
    t->async_wait([&, t](const std::error_code& ec) {
      CHECK_FALSE(ec);
      log(urt::this_task::priority());
    });
  }
  rt.spawn({.priority = 20}, [&] { log(20); });
  rt.spawn({.priority = 40}, [&] { log(40); });
  rt.spawn({.priority = 5}, [&] { log(5); });
  // The timers are due before the worker leaves the held task.
  std::this_thread::sleep_for(2ms);
  h.open();
  auto done = std::async([&] {
    for (;;) {
      {
        std::lock_guard lock(m);
        if (order.size() == 6) return;
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  done.get();
  CHECK(order == std::vector<int>{50, 40, 30, 20, 10, 5});
}

TEST_CASE("executor: a long task's preempt_point() takes in a more urgent completion") {
  urt::runtime rt(urt_test::synthetic_workers(1));
  urt::net::steady_timer urgent(rt.executor({.priority = 90}));
  std::atomic<bool> armed{false};
  std::atomic<bool> fired{false};
  std::promise<bool> saw;
  rt.spawn({.priority = 10}, [&] {
    urgent.expires_after(0s);
    urgent.async_wait([&](const std::error_code&) { fired.store(true); });
    armed.store(true);
    // The completion becomes a task at 90 here; it runs once this returns.
    bool preempted = false;
    while (!preempted) preempted = urt::preempt_point();
    saw.set_value(!fired.load());
  });
  CHECK(saw.get_future().get());  // preempted before the handler ran, i.e. by it
  rt.stop();
  CHECK(fired.load());
  CHECK(armed.load());
}

TEST_CASE(
    "executor: a completion a preempt point takes in runs at its yield, not on an idle peer") {
  // Worker 1 idle, worker 0 in a long task at 10 whose preempt points poll
  // its reactor. The completion's task (90, any worker) is kept on worker 0
  // and run when the task yields there, as the kernel runs a task woken
  // more urgent on the CPU it woke on; it was pushed to the idle worker,
  // which ran it only once woken.
  urt::runtime rt(urt_test::synthetic_workers(2));
  const std::uint64_t pushes_before = rt.stats().workers[0].pushes;
  std::atomic<bool> fired{false};
  std::atomic<unsigned> ran_on{~0U};
  std::promise<bool> yielded_first;
  std::optional<urt::net::steady_timer> urgent;
  rt.spawn({.priority = 10, .affinity = urt::worker_set{0}}, [&] {
    urgent.emplace(rt.executor({.priority = 90}));  // homed on this worker
    urgent->expires_after(0s);
    urgent->async_wait([&](const std::error_code&) {
      ran_on.store(urt::this_task::worker_id());
      fired.store(true);
    });
    // Until a preempt point asks to yield, or the handler ran elsewhere.
    bool preempted = false;
    while (!preempted && !fired.load()) preempted = urt::preempt_point();
    yielded_first.set_value(preempted && !fired.load());
  });
  CHECK(yielded_first.get_future().get());
  rt.stop();
  CHECK(fired.load());
  CHECK(ran_on.load() == 0);
  CHECK(rt.stats().workers[0].pushes == pushes_before);
}

TEST_CASE("executor: equal only with equal runtime, priority, affinity and group") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  urt::runtime other(urt_test::synthetic_workers(2));
  const urt::executor a = rt.executor({.priority = 7});
  CHECK(a == rt.executor({.priority = 7}));
  CHECK(a == urt::executor(a));
  CHECK(a != rt.executor({.priority = 8}));
  CHECK(a != other.executor({.priority = 7}));
  CHECK(a != rt.executor({.priority = 7, .affinity = urt::worker_set{1}}));
  CHECK(rt.executor({.priority = 7, .affinity = urt::worker_set{1}}) ==
        rt.executor({.priority = 7, .affinity = urt::worker_set{1}}));
  const urt::group g = rt.make_group({.name = "g"});
  CHECK(a != rt.executor({.priority = 7, .group = g}));
  CHECK(a == asio::require(a, asio::execution::outstanding_work.tracked));
  CHECK(a != asio::require(a, asio::execution::blocking.never));
}

TEST_CASE("executor: a chosen home carries the I/O, not the affinity") {
  urt::runtime rt(urt_test::synthetic_workers(4));
  const urt::executor at3 = rt.executor({.priority = 40}, 3);
  CHECK(at3.home_worker() == 3);
  const urt::executor only3 = rt.executor({.affinity = urt::worker_set{3}});
  CHECK(&asio::query(at3, asio::execution::context) ==
        &asio::query(only3, asio::execution::context));
  CHECK(&asio::query(at3, asio::execution::context) !=
        &asio::query(rt.executor({}, 1), asio::execution::context));
  // From a task on worker 0, the chosen home still wins.
  std::promise<unsigned> from_task;
  rt.spawn({.priority = 10, .affinity = urt::worker_set{0}},
           [&] { from_task.set_value(rt.executor({}, 2).home_worker()); });
  CHECK(from_task.get_future().get() == 2);
  // Its tasks are not kept on the home: the affinity (any) decides.
  std::promise<seen> ran;
  asio::post(at3, [&] { ran.set_value(here()); });
  CHECK(ran.get_future().get().priority == 40);
}

TEST_CASE("executor: an idle worker takes in the completions of a home stuck in a task") {
  // Worker 0 runs a task with no scheduling point; the timer's completion
  // waits in its reactor. Worker 1, idle, polls that reactor for it
  // (runtime/io_rescue.hpp): a handler its executor lets run anywhere runs
  // on worker 1 while worker 0 is still stuck; one kept to worker 0 by its
  // affinity is taken in all the same but runs on worker 0 afterwards.
  urt::runtime rt(urt_test::synthetic_workers(2));
  for (const bool kept : {false, true}) {
    CAPTURE(kept);
    const urt::executor ex = kept ? rt.executor({.priority = 40, .affinity = urt::worker_set{0}})
                                  : rt.executor({.priority = 40}, 0);
    REQUIRE(ex.home_worker() == 0);
    const std::uint64_t rescued_before = rt.stats().total().io_rescued;
    std::atomic<bool> started{false};
    std::atomic<bool> fired{false};
    std::promise<bool> rescued_while_stuck;
    std::promise<seen> ran;
    rt.spawn({.priority = 10, .affinity = urt::worker_set{0}}, [&] {
      started.store(true);
      // Stuck until the rescue happened (or, failing it, a bound far
      // beyond any scheduling delay); no preempt_point().
      const auto give_up = urt::clock::now() + 20s;
      const auto rescued = [&] {
        return kept ? rt.stats().total().io_rescued > rescued_before : fired.load();
      };
      while (!rescued() && urt::clock::now() < give_up) {
      }
      rescued_while_stuck.set_value(rescued());
    });
    while (!started.load()) std::this_thread::sleep_for(100us);
    urt::net::steady_timer t(ex);
    t.expires_after(0s);
    t.async_wait([&](const std::error_code& ec) {
      CHECK_FALSE(ec);
      fired.store(true);
      ran.set_value(here());
    });
    // A worker watches when it goes idle: worker 1 parked before the timer
    // existed, so give it a task to come back from.
    rt.spawn({.priority = 5, .affinity = urt::worker_set{1}}, [] {});
    CHECK(rescued_while_stuck.get_future().get());
    const seen s = ran.get_future().get();
    CHECK(s.priority == 40);
    CHECK(s.worker == (kept ? 0U : 1U));
    CHECK(rt.stats().workers[1].io_rescued > 0);
  }
}

TEST_CASE("executor: bad inputs get clear errors") {
  urt::runtime rt(urt_test::synthetic_workers(2));
  CHECK_THROWS_WITH_AS((void)urt::priority(100), "urt::priority: 100 is outside 0..99",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)urt::priority(-1), "urt::priority: -1 is outside 0..99",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(asio::require(rt.executor(), urt::priority),
                       "asio::require(urt::executor, urt::priority): level -1 is outside 0..99 "
                       "(use urt::priority(p))",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)rt.executor({.priority = 120}),
                       "runtime::executor: task_spec.priority: 120 is outside 0..99",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)rt.executor({.affinity = urt::worker_set{5}}),
                       "runtime::executor: task_spec.affinity: worker 5 does not exist (the "
                       "runtime has workers 0-1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)rt.executor({}, 2),
                       "runtime::executor: home: worker 2 does not exist (the runtime has "
                       "workers 0-1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)rt.executor({.affinity = urt::worker_set{1}}, 0),
                       "runtime::executor: home: worker 0 is outside task_spec.affinity",
                       std::invalid_argument);
  rt.stop();
  CHECK_THROWS_WITH_AS((void)rt.executor(), "runtime::executor: the runtime is stopping or stopped",
                       urt::runtime_stopped);
}

namespace {
// Counts its destruction: lives in a coroutine's frame.
struct frame_witness {
  std::atomic<int>* destroyed;
  explicit frame_witness(std::atomic<int>& d) : destroyed(&d) {}
  frame_witness(const frame_witness&) = delete;
  frame_witness& operator=(const frame_witness&) = delete;
  ~frame_witness() { destroyed->fetch_add(1); }
};

urt::awaitable<void> wait_on_timer(std::atomic<int>& destroyed, std::atomic<int>& resumed,
                                   std::atomic<int>& started) {
  const frame_witness witness(destroyed);
  started.fetch_add(1);
  urt::net::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(1h);
  std::error_code ec;
  co_await t.async_wait(asio::redirect_error(urt::use_awaitable, ec));
  resumed.fetch_add(1);
}

urt::awaitable<void> wait_on_read(urt::net::tcp_socket& s, std::atomic<int>& destroyed,
                                  std::atomic<int>& resumed, std::atomic<int>& started) {
  const frame_witness witness(destroyed);
  started.fetch_add(1);
  char buf[8];
  std::error_code ec;
  co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(urt::use_awaitable, ec));
  resumed.fetch_add(1);
}
}  // namespace

TEST_CASE("executor: coroutines suspended on I/O when the runtime stops are destroyed by stop()") {
  // Their frames are pending handlers of the workers' io_contexts; Asio
  // destroys a coroutine frame by posting to its executor. That must not
  // reach a runtime that is being destroyed (a use-after-free of its
  // placement once), nor be left for the destructor: stop() returns with
  // every frame gone, unresumed, and a future waiting on one is settled.
  for (const urt::stop_mode mode : {urt::stop_mode::drain, urt::stop_mode::cancel}) {
    CAPTURE(static_cast<int>(mode));
    std::atomic<int> destroyed{0};
    std::atomic<int> resumed{0};
    std::atomic<int> started{0};
    std::future<void> settled;
    {
      urt::runtime rt(urt_test::synthetic_workers(2));
      const urt::executor ex = rt.executor({.priority = 50});
      urt::net::tcp_acceptor acceptor(
          ex, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      asio::io_context client_io;
      asio::ip::tcp::socket client(client_io);
      client.connect(acceptor.local_endpoint());
      urt::net::tcp_socket server = acceptor.accept();
      asio::co_spawn(ex, wait_on_timer(destroyed, resumed, started), asio::detached);
      asio::co_spawn(ex, wait_on_read(server, destroyed, resumed, started), asio::detached);
      settled = asio::co_spawn(ex, wait_on_timer(destroyed, resumed, started), asio::use_future);
      // Let them reach their waits (stop() would also wait for a coroutine
      // still running up to its first suspension).
      while (started.load() < 3) std::this_thread::yield();
      std::this_thread::sleep_for(20ms);
      CHECK(destroyed.load() == 0);
      rt.stop(mode);
      CHECK(destroyed.load() == 3);
      CHECK(settled.wait_for(0s) == std::future_status::ready);
    }
    CHECK(destroyed.load() == 3);
    CHECK(resumed.load() == 0);
    CHECK_THROWS(settled.get());  // destroyed unrun: a broken promise
  }
}

namespace {
// A one-shot event that keeps its waiter's completion handler (a common
// Asio idiom for user-defined operations): fired, or dropped unrun.
struct stored_handler_event {
  struct base {
    virtual ~base() = default;
  };
  template <class H>
  struct model final : base {
    H handler;
    explicit model(H&& h) : handler(std::move(h)) {}
  };
  std::unique_ptr<base> pending;
  std::atomic<bool> armed{false};
  template <class Token>
  auto async_wait(Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto h) {
          pending = std::make_unique<model<decltype(h)>>(std::move(h));
          armed.store(true);
        },
        token);
  }
};

urt::awaitable<void> wait_on_event(stored_handler_event& ev, std::atomic<int>& destroyed,
                                   std::atomic<int>& resumed) {
  const frame_witness witness(destroyed);
  co_await ev.async_wait(urt::use_awaitable);
  resumed.fetch_add(1);
}

struct destruction_witness {
  std::atomic<int>* destroyed;
  bool owner = true;
  explicit destruction_witness(std::atomic<int>& d) : destroyed(&d) {}
  destruction_witness(destruction_witness&& o) noexcept : destroyed(o.destroyed) { o.owner = false; }
  destruction_witness& operator=(destruction_witness&&) = delete;
  ~destruction_witness() {
    if (owner) destroyed->fetch_add(1);
  }
};
}  // namespace

TEST_CASE("executor: once stopped, execute() destroys the function unrun and never throws") {
  // Asio calls execute() where an exception can only end the process: a
  // suspended coroutine's destructor posts the frame's destruction to its
  // executor (here: a handler a user operation kept, dropped after the
  // stop), and co_spawn posts again while unwinding from a refused first
  // post. Both ended in std::terminate when a stopped runtime's executor
  // threw runtime_stopped.
  std::atomic<int> destroyed{0};
  std::atomic<int> resumed{0};
  std::atomic<int> ran{0};
  stored_handler_event ev;
  urt::runtime rt(urt_test::synthetic_workers(2));
  const urt::executor ex = rt.executor({.priority = 20});
  asio::co_spawn(ex, wait_on_event(ev, destroyed, resumed), asio::detached);
  while (!ev.armed.load()) std::this_thread::yield();
  rt.stop();
  CHECK(destroyed.load() == 0);  // the frame lives in the kept handler
  ev.pending.reset();            // its destruction is posted to the stopped runtime
  CHECK(destroyed.load() == 1);
  CHECK(resumed.load() == 0);
  // post, dispatch and defer: the function object is destroyed unrun, on
  // this thread.
  std::atomic<int> posted_destroyed{0};
  const auto counted = [&] { return [w = destruction_witness(posted_destroyed), &ran] { ran.fetch_add(1); }; };
  CHECK_NOTHROW(asio::post(ex, counted()));
  CHECK_NOTHROW(asio::dispatch(ex, counted()));
  CHECK_NOTHROW(asio::defer(asio::require(ex, urt::priority(90)), counted()));
  CHECK(posted_destroyed.load() == 3);
  // co_spawn: the new coroutine's frame (its parameter counts it) is
  // destroyed unrun; use_future's future is broken.
  const auto never_started = [&ran](destruction_witness) -> urt::awaitable<void> {
    ran.fetch_add(1);
    co_return;
  };
  std::atomic<int> frames{0};
  CHECK_NOTHROW(asio::co_spawn(ex, never_started(destruction_witness(frames)), asio::detached));
  CHECK(frames.load() == 1);
  std::future<void> f;
  CHECK_NOTHROW(
      f = asio::co_spawn(ex, never_started(destruction_witness(frames)), asio::use_future));
  CHECK(frames.load() == 2);
  REQUIRE(f.valid());
  CHECK(f.wait_for(0s) == std::future_status::ready);
  CHECK_THROWS(f.get());
  CHECK(ran.load() == 0);
  CHECK(resumed.load() == 0);
  CHECK(destroyed.load() == 1);
  CHECK(rt.stats().total().accepted == rt.stats().total().completed);
}

TEST_CASE("executor: a pending operation at stop() is destroyed unrun, and nothing leaks") {
  std::atomic<int> ran{0};
  {
    urt::runtime rt(urt_test::synthetic_workers(2));
    urt::net::steady_timer t(rt.executor({.priority = 5}));
    t.expires_after(1h);
    t.async_wait([&](const std::error_code&) { ran.fetch_add(1); });
    CHECK(rt.stop() == 0);  // a pending wait is not an accepted task
  }
  CHECK(ran.load() == 0);
}
