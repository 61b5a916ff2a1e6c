// The reactor rescue on a live runtime (runtime/io_rescue.hpp): echo
// connections homed on every worker, one per strand as urt-kv has them,
// while each worker in turn is held in a task with no scheduling point
// until an echo of one of its own connections has come back, which only a
// rescuer can deliver. Every byte must come back once and in order.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../topologies.hpp"
#include "urt/executor.hpp"
#include "urt/urt.hpp"

using namespace std::chrono_literals;

namespace {

using strand_ex = asio::strand<urt::executor>;
using server_socket = asio::basic_stream_socket<asio::ip::tcp, strand_ex>;
constexpr auto use_awaitable = asio::use_awaitable_t<strand_ex>{};

asio::awaitable<void, strand_ex> echo(server_socket s) {
  std::array<char, 256> buf{};
  for (;;) {
    std::error_code ec;
    const std::size_t n =
        co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    co_await asio::async_write(s, asio::buffer(buf.data(), n), asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
  }
}

}  // namespace

TEST_CASE("io_rescue live: echoes of a held home's connections come back through a rescuer") {
  urt::runtime rt(urt_test::synthetic_workers(3));
  const unsigned n = static_cast<unsigned>(rt.worker_count());
  constexpr unsigned per_worker = 2;
  constexpr int rounds = 12;
  const auto loopback = asio::ip::make_address("127.0.0.1");

  urt::net::tcp_acceptor acceptor(rt.executor({.priority = 50}, 0), {loopback, 0});
  const auto port = acceptor.local_endpoint().port();
  asio::io_context client_io;
  std::vector<asio::ip::tcp::socket> clients;
  std::vector<unsigned> home_of;
  for (unsigned i = 0; i < n * per_worker; ++i) {
    clients.emplace_back(client_io);
    clients.back().connect({loopback, port});
    const unsigned home = i % n;
    server_socket s = acceptor.accept(asio::make_strand(rt.executor({.priority = 50}, home)));
    asio::co_spawn(s.get_executor(), echo(std::move(s)), asio::detached);
    home_of.push_back(home);
  }

  const std::uint64_t rescued_before = rt.stats().total().io_rescued;
  for (int r = 0; r < rounds; ++r) {
    CAPTURE(r);
    const unsigned held = static_cast<unsigned>(r) % n;
    std::atomic<bool> started{false};
    std::atomic<bool> echoed{false};
    std::promise<bool> released_by_echo;
    rt.spawn({.priority = 60, .affinity = urt::worker_set{held}}, [&] {
      started.store(true);
      // No preempt_point(): only a rescuer can deliver the echo. The bound
      // only keeps a broken rescue from hanging the test.
      const auto give_up = urt::clock::now() + 20s;
      while (!echoed.load() && urt::clock::now() < give_up) {
      }
      released_by_echo.set_value(echoed.load());
    });
    while (!started.load()) std::this_thread::sleep_for(100us);
    // A worker watches when it goes idle (a worker that parked before the
    // held one became stale does not look again by itself): give each
    // other worker a task to come back from.
    for (unsigned w = 0; w < n; ++w) {
      if (w != held) rt.spawn({.priority = 1, .affinity = urt::worker_set{w}}, [] {});
    }
    // Every connection gets a message; those of the held worker first.
    for (unsigned pass = 0; pass < 2; ++pass) {
      for (unsigned i = 0; i < clients.size(); ++i) {
        if ((home_of[i] == held) != (pass == 0)) continue;
        char text[32];
        const int len = std::snprintf(text, sizeof text, "r%dc%u;", r, i);
        const std::string msg(text, static_cast<std::size_t>(len));
        asio::write(clients[i], asio::buffer(msg));
        std::string back(msg.size(), '\0');
        asio::read(clients[i], asio::buffer(back));
        CHECK(back == msg);
        if (home_of[i] == held) echoed.store(true);
      }
    }
    CHECK(released_by_echo.get_future().get());
  }
  CHECK(rt.stats().total().io_rescued - rescued_before >= static_cast<std::uint64_t>(rounds));
  for (auto& c : clients) c.close();  // the echo coroutines end at EOF
  acceptor.close();
  rt.stop();
}

TEST_CASE("io_rescue live: a worker idle beside a running peer with I/O parks between its checks") {
  // Worker 1 checks worker 0's reactor every io_poll_interval +
  // ipi_timeout while worker 0 runs a long task with a socket read
  // pending. With a spin longer than that (urt-kv spins 500 us), spinning
  // from one check to the next kept worker 1 busy for the whole task; it
  // now parks until each check once one has found nothing.
  urt::runtime_options o = urt_test::synthetic_workers(2);
  o.idle_spin = 500us;
  o.idle_spin_policy = urt::spin_policy::fixed;
  urt::runtime rt(o);
  const auto loopback = asio::ip::make_address("127.0.0.1");
  urt::net::tcp_acceptor acceptor(rt.executor({.priority = 50}, 0), {loopback, 0});
  asio::io_context client_io;
  asio::ip::tcp::socket client(client_io);
  client.connect(acceptor.local_endpoint());
  urt::net::tcp_socket server = acceptor.accept();
  std::array<char, 16> buf{};
  server.async_read_some(asio::buffer(buf), [](const std::error_code&, std::size_t) {});
  std::atomic<std::uint64_t> parks_at_start{0};
  std::atomic<std::uint64_t> parks_at_end{0};
  std::promise<void> done;
  rt.spawn({.priority = 10, .affinity = urt::worker_set{0}}, [&] {
    // Worker 1 runs a task and goes idle again while this one runs, so
    // that it watches this worker's reactor (a worker parked before this
    // one got busy sleeps until something wakes it).
    std::atomic<bool> ran{false};
    rt.spawn({.priority = 10, .affinity = urt::worker_set{1}}, [&ran] { ran.store(true); });
    while (!ran.load()) (void)urt::preempt_point();
    parks_at_start.store(rt.stats().workers[1].parks);
    // 200 ms of work, looking into its own reactor at its preempt points.
    const auto end = std::chrono::steady_clock::now() + 200ms;
    while (std::chrono::steady_clock::now() < end) (void)urt::preempt_point();
    parks_at_end.store(rt.stats().workers[1].parks);
    done.set_value();
  });
  done.get_future().wait();
  CAPTURE(parks_at_start.load());
  CAPTURE(parks_at_end.load());
  // A check every 110 us for 200 ms: hundreds of parks (none when it spun).
  CHECK(parks_at_end.load() - parks_at_start.load() >= 20);
  std::error_code ec;
  server.close(ec);
  rt.stop();
}

namespace {
// The counters that tell where a rescue went (a failure's report).
std::string io_counters(const urt::worker_stats& w) {
  std::ostringstream out;
  out << "completed " << w.completed << " parks " << w.parks << " doorbells " << w.doorbells
      << " pulls " << w.pulls << " stuck_pulls " << w.stuck_pulls << " io_polls " << w.io_polls
      << " io_handlers " << w.io_handlers << " io_rescued " << w.io_rescued << " io_ring_skips "
      << w.io_ring_skips;
  return out.str();
}

// A task that keeps worker 1 busy and never lets it go idle: it runs
// until `stop`, and yields at a preempt point that reports more urgent
// work by queuing its own continuation first (so the worker's run queue
// is never empty, and it never reaches its idle pass).
struct busy_chain {
  urt::runtime* rt;
  std::atomic<bool>* stop;
  std::atomic<bool>* started;
  std::atomic<int>* yields;
  std::promise<void>* done;
  void operator()() const {
    started->store(true);
    while (!stop->load()) {
      if (urt::preempt_point()) {
        yields->fetch_add(1);
        rt->spawn({.priority = 40, .affinity = urt::worker_set{1}}, *this);
        return;
      }
    }
    done->set_value();
  }
};
}  // namespace

TEST_CASE("io_rescue live: a busy worker with I/O of its own rescues a held peer's connections") {
  // Worker 0 is held in a task with no scheduling point; worker 1 runs a
  // chain of low tasks and never goes idle, so only its busy look
  // (io_watch::while_busy, from its own reactor polls) can deliver the echo
  // of a connection homed on worker 0.
  urt::runtime rt(urt_test::synthetic_workers(2));
  const auto loopback = asio::ip::make_address("127.0.0.1");
  urt::net::tcp_acceptor acceptor(rt.executor({.priority = 50}, 0), {loopback, 0});
  const auto port = acceptor.local_endpoint().port();
  asio::io_context client_io;
  std::vector<asio::ip::tcp::socket> clients;  // [0]: homed on worker 0, [1]: on worker 1
  for (unsigned home = 0; home < 2; ++home) {
    clients.emplace_back(client_io);
    clients.back().connect({loopback, port});
    server_socket s = acceptor.accept(asio::make_strand(rt.executor({.priority = 50}, home)));
    asio::co_spawn(s.get_executor(), echo(std::move(s)), asio::detached);
  }
  // Both echo loops wait in their reads: each worker has I/O outstanding.
  const auto round_trip = [&](unsigned i, const std::string& msg) {
    asio::write(clients[i], asio::buffer(msg));
    std::string back(msg.size(), '\0');
    asio::read(clients[i], asio::buffer(back));
    return back;
  };
  CHECK(round_trip(0, "warm0;") == "warm0;");
  CHECK(round_trip(1, "warm1;") == "warm1;");

  std::atomic<bool> stop_busy{false};
  std::atomic<bool> busy_started{false};
  std::atomic<int> yields{0};
  std::promise<void> busy_done;
  rt.spawn({.priority = 40, .affinity = urt::worker_set{1}},
           busy_chain{&rt, &stop_busy, &busy_started, &yields, &busy_done});
  while (!busy_started.load()) std::this_thread::sleep_for(100us);
  const urt::worker_stats before = rt.stats().workers[1];

  std::atomic<bool> held_started{false};
  std::atomic<bool> echoed{false};
  std::promise<bool> released_by_echo;
  rt.spawn({.priority = 60, .affinity = urt::worker_set{0}}, [&] {
    held_started.store(true);
    // No preempt_point(); the bound only keeps a broken rescue from
    // hanging the test (worker 0 then delivers the echo itself).
    const auto give_up = urt::clock::now() + 10s;
    while (!echoed.load() && urt::clock::now() < give_up) {
    }
    released_by_echo.set_value(echoed.load());
  });
  while (!held_started.load()) std::this_thread::sleep_for(100us);
  for (int i = 0; i < 5; ++i) {
    const std::string msg = "held" + std::to_string(i) + ";";
    CHECK(round_trip(0, msg) == msg);
  }
  echoed.store(true);
  const bool by_echo = released_by_echo.get_future().get();
  if (!by_echo) {
    // This has failed in about one full suite run in ten (never alone):
    // what each worker did says where the echoes waited.
    MESSAGE("worker 0: " << io_counters(rt.stats().workers[0]));
    MESSAGE("worker 1 before: " << io_counters(before)
                                << "; after: " << io_counters(rt.stats().workers[1])
                                << "; chain yields " << yields.load());
  }
  CHECK(by_echo);
  // Read while the chain still runs: once it ends, worker 1 goes idle and parks.
  const urt::worker_stats after = rt.stats().workers[1];
  stop_busy.store(true);
  busy_done.get_future().wait();

  CHECK(after.io_rescued > before.io_rescued);
  CHECK(after.parks == before.parks);  // busy all along: no idle pass parked it
  CHECK(yields.load() >= 1);           // the echo handlers ran there, above the chain
  for (auto& c : clients) c.close();
  acceptor.close();
  rt.stop();
}
