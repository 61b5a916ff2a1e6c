// Tests of the ready ring (runtime/ready_ring.*): an epoll descriptor's
// events mark it, a take() before the poll never loses one, a busy worker
// with a quiet reactor skips its polls' system calls while a socket's data
// still reaches its preempt points, and a task's own system calls never
// see the ring's wake-ups. Where the kernel refuses io_uring, the ring
// reports it (the worker's stats say why) and says "poll" every time.
// Ordered by events, never by time. Asio before doctest and the standard
// headers, as in the library's own files (runtime/runtime.cpp says why).
#include <doctest/doctest.h>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <future>
#include <thread>

#include "../topologies.hpp"
#include "io_poller.hpp"
#include "reactor_fd.hpp"
#include "ready_ring.hpp"
#include "urt/executor.hpp"
#include "urt/urt.hpp"

using urt::detail::ready_ring;

namespace {

// A pipe whose read end is in an epoll set, edge-triggered as Asio
// registers its descriptors.
struct watched_pipe {
  int ends[2] = {-1, -1};
  int epoll = -1;
  watched_pipe() {
    REQUIRE(::pipe2(ends, O_NONBLOCK | O_CLOEXEC) == 0);
    epoll = ::epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(epoll >= 0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    REQUIRE(::epoll_ctl(epoll, EPOLL_CTL_ADD, ends[0], &ev) == 0);
  }
  ~watched_pipe() {
    ::close(epoll);
    ::close(ends[0]);
    ::close(ends[1]);
  }
  watched_pipe(const watched_pipe&) = delete;
  watched_pipe& operator=(const watched_pipe&) = delete;
  void send() const { REQUIRE(::write(ends[1], "x", 1) == 1); }
  // The poll the ring stands for, then the read the event's owner makes.
  int poll_and_read() const {
    epoll_event ev{};
    const int n = ::epoll_wait(epoll, &ev, 1, 0);
    char c;
    while (::read(ends[0], &c, 1) == 1) {
    }
    return n;
  }
};

// A TCP connection whose server end is homed on worker 0 of `rt` at 90:
// `client` writes to it from this thread, `server` reads on the worker.
struct loopback_pair {
  urt::executor at90;
  urt::net::tcp_acceptor acceptor;
  asio::io_context client_io;
  asio::ip::tcp::socket client{client_io};
  urt::net::tcp_socket server;
  explicit loopback_pair(urt::runtime& rt)
      : at90(rt.executor({.priority = 90})),
        acceptor(at90, {asio::ip::make_address("127.0.0.1"), 0}),
        server(at90) {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

// Whether this kernel gives the process a ready ring at all.
bool kernel_gives_rings() {
  watched_pipe probe;
  ready_ring r;
  return r.open(probe.epoll);
}

// A refusal is one of the kernel's ways of saying no to io_uring.
bool refused(int error) {
  return error == ENOSYS || error == EPERM || error == EINVAL || error == ENOMEM;
}

}  // namespace

TEST_CASE("ready ring: an event marks it, and a take before the poll loses none") {
  watched_pipe p;
  ready_ring ring;
  if (!ring.open(p.epoll)) {
    // The fallback: inactive, the reason kept, every look says poll.
    CHECK(refused(ring.open_error()));
    CHECK_FALSE(ring.active());
    CHECK(ring.signalled());
    return;
  }
  CHECK(ring.open_error() == 0);
  CHECK_FALSE(ring.signalled());  // armed, nothing came
  p.send();
  CHECK(ring.signalled());
  // The wake-up's work waits for take(): a system call of the thread's
  // own (this poll) does not run it, so the ring stays marked.
  CHECK(p.poll_and_read() == 1);
  CHECK(ring.signalled());
  ring.take();
  CHECK_FALSE(ring.signalled());
  CHECK(p.poll_and_read() == 0);
  // Events between the take and the poll: collected by the poll, and they
  // mark the ring again (never lost; at worst one poll too many).
  for (int round = 0; round < 100; ++round) {
    ring.take();
    CHECK_FALSE(ring.signalled());
    p.send();
    CHECK(ring.signalled());
    CHECK(p.poll_and_read() == 1);
  }
  // Polls with no take before them (a poller whose polls run
  // completions): the ring stays marked throughout, and one take re-arms
  // it for the next event.
  for (int i = 0; i < 100; ++i) {
    p.send();
    CHECK(ring.signalled());
    CHECK(p.poll_and_read() == 1);
  }
  ring.take();
  CHECK(p.poll_and_read() == 0);
  CHECK(ring.active());
  CHECK_FALSE(ring.signalled());
  p.send();
  CHECK(ring.signalled());
}

TEST_CASE("ready ring: closed it says poll, reopened it works again") {
  watched_pipe p;
  ready_ring ring;
  if (!ring.open(p.epoll)) return;  // the case above checks the refusal
  ring.close();
  CHECK_FALSE(ring.active());
  CHECK(ring.signalled());
  ring.take();  // nothing to take, no crash
  REQUIRE(ring.open(p.epoll));
  CHECK_FALSE(ring.signalled());
  p.send();
  CHECK(ring.signalled());
}

TEST_CASE("ready ring: a poll the kernel refuses leaves the ring inactive, saying poll") {
  // The poll's own failure comes as its last completion (no F_MORE, a
  // negative result): the next take() sees it, closes the ring and keeps
  // the error, and from then on every look says poll.
  if (!kernel_gives_rings()) return;  // the first case checks the refusal
  ready_ring ring;
  if (!ring.open(-1)) {
    CHECK(ring.open_error() == EBADF);  // refused at submission
  } else {
    CHECK(ring.signalled());  // the failure's completion
    ring.take();
    CHECK_FALSE(ring.active());
    CHECK(ring.open_error() == EBADF);
  }
  CHECK(ring.signalled());
  ring.take();  // inactive: nothing to do, no crash
  CHECK(ring.signalled());
}

TEST_CASE("ready ring: an io_context's reactor descriptor is found and watched") {
  asio::io_context io{1};
  CHECK(urt::detail::reactor_epoll_fd(io) == -1);  // no reactor made yet
  asio::posix::stream_descriptor made(io);         // makes the reactor
  const int fd = urt::detail::reactor_epoll_fd(io);
  REQUIRE(fd >= 0);
  int ends[2];
  REQUIRE(::pipe2(ends, O_NONBLOCK | O_CLOEXEC) == 0);
  asio::posix::stream_descriptor reader(io, ends[0]);
  bool read = false;
  char c;
  reader.async_read_some(asio::buffer(&c, 1),
                         [&](const std::error_code& ec, std::size_t) { read = !ec; });
  ready_ring ring;
  if (ring.open(fd)) {
    // Asio's reactor starts interrupted (its eventfd ready): the ring sees
    // that first, until a take and a poll collect it.
    ring.take();
    io.poll();
    CHECK_FALSE(ring.signalled());
  }
  REQUIRE(::write(ends[1], "x", 1) == 1);
  CHECK(ring.signalled());  // marked by the write, or inactive: poll either way
  ring.take();
  io.poll();
  CHECK(read);
  ::close(ends[1]);
}

TEST_CASE("io_poller: the ring's state is reported, a refusal with its reason") {
  // What worker_stats::io_ring_error shows: 0 when the ring is in use or
  // not asked for, else why it is off (no epoll reactor; the kernel's no).
  asio::io_context io{1};
  SUBCASE("not asked for") {
    urt::detail::io_poller poller(io, {std::chrono::microseconds{10}, false});
    asio::posix::stream_descriptor made(io);
    CHECK_FALSE(poller.open_ready_ring());
    CHECK(poller.ring_error() == 0);
  }
  SUBCASE("asked for") {
    urt::detail::io_poller poller(io, {std::chrono::microseconds{10}, true});
    CHECK_FALSE(poller.open_ready_ring());  // no reactor made yet: nothing to watch
    CHECK(poller.ring_error() == EOPNOTSUPP);
    asio::posix::stream_descriptor made(io);
    if (poller.open_ready_ring()) {
      CHECK(poller.ring_error() == 0);
    } else {
      CHECK(refused(poller.ring_error()));
    }
    poller.close_ready_ring();
  }
}

TEST_CASE("ready ring: a busy worker with a quiet reactor skips polls, and data still preempts") {
  // With io_ready_ring false, or a kernel that refuses io_uring, no poll is
  // skipped and the data still preempts (by the interval's polls).
  bool asked = true;
  SUBCASE("io_ready_ring true") { asked = true; }
  SUBCASE("io_ready_ring false") { asked = false; }
  urt::runtime_options o = urt_test::synthetic_workers(1);
  o.io_ready_ring = asked;
  urt::runtime rt(o);
  const bool ring_works = asked && kernel_gives_rings();
  loopback_pair link(rt);
  std::atomic<bool> arrived{false};
  char byte = 0;
  link.server.async_read_some(asio::buffer(&byte, 1),
                              [&](const std::error_code& ec, std::size_t) { arrived.store(!ec); });
  std::atomic<bool> quiet_seen{false};
  std::promise<bool> preempted_first;
  rt.spawn({.priority = 10}, [&] {
    // Preempt points until the reactor's quiet looks are seen skipped (or,
    // without the ring, at once), then until the read's task preempts.
    bool preempted = false;
    while (!preempted) {
      preempted = urt::preempt_point();
      if (!quiet_seen.load() && (!ring_works || rt.stats().workers[0].io_ring_skips > 0)) {
        quiet_seen.store(true);
      }
    }
    preempted_first.set_value(!arrived.load());
  });
  while (!quiet_seen.load()) std::this_thread::yield();
  asio::write(link.client, asio::buffer("!", 1));
  CHECK(preempted_first.get_future().get());  // preempted by the read's handler
  rt.stop();
  CHECK(arrived.load());
  CHECK(byte == '!');
  const urt::worker_stats s = rt.stats().workers[0];
  if (ring_works) {
    CHECK(s.io_ring_skips > 0);
  } else {
    CHECK(s.io_ring_skips == 0);
  }
  // Why the ring is off, where it is: the kernel's refusal, kept; nothing
  // when it runs or was not asked for.
  if (asked && !ring_works) {
    CHECK(refused(s.io_ring_error));
    CHECK(rt.stats().total().io_ring_error == s.io_ring_error);
  } else {
    CHECK(s.io_ring_error == 0);
  }
}

TEST_CASE("ready ring: a completion Asio queues without an event still reaches a busy worker") {
  // A read started from another thread on a socket whose data is already
  // there completes at once: Asio queues its completion in the worker's
  // io_context, and no epoll event marks the ring. The worker, busy in a
  // long task, must still take it in: its poll at least every
  // quiet_poll_every intervals does.
  urt::runtime rt(urt_test::synthetic_workers(1));
  loopback_pair link(rt);
  // I/O outstanding on the worker, so that it polls at all.
  urt::net::steady_timer keep(link.at90);
  keep.expires_after(std::chrono::hours{1});
  keep.async_wait([](const std::error_code&) {});
  asio::write(link.client, asio::buffer("!", 1));
  const std::uint64_t polls_before = rt.stats().workers[0].io_polls;
  std::atomic<bool> settled{false};
  std::atomic<bool> started{false};
  std::atomic<bool> arrived{false};
  std::promise<bool> preempted_first;
  rt.spawn({.priority = 10}, [&] {
    bool preempted = false;
    while (!preempted) {
      preempted = urt::preempt_point();
      // The data's event was taken by a poll, and the ring is quiet since.
      if (!settled.load() && rt.stats().workers[0].io_polls > polls_before &&
          rt.stats().workers[0].io_ring_skips > 0) {
        settled.store(true);
      }
      if (!settled.load() && rt.stats().workers[0].io_ring_skips == 0 &&
          rt.stats().workers[0].io_polls > polls_before + 1) {
        settled.store(true);  // no ring here: every look is a poll
      }
    }
    preempted_first.set_value(started.load() && !arrived.load());
  });
  while (!settled.load()) std::this_thread::yield();
  char byte = 0;
  started.store(true);
  link.server.async_read_some(asio::buffer(&byte, 1),
                              [&](const std::error_code& ec, std::size_t) { arrived.store(!ec); });
  CHECK(preempted_first.get_future().get());  // preempted by the read's handler
  keep.cancel();
  rt.stop();
  CHECK(arrived.load());
  CHECK(byte == '!');
}

TEST_CASE("ready ring: a task's own epoll_wait sees no EINTR from its worker's ring") {
  // The ring's wake-up runs in the waker's context and queues work for the
  // worker's thread. Run at the thread's next return from the kernel (the
  // ring's first form, COOP_TASKRUN), it marked the thread as a signal
  // does, and a task's own epoll_wait on that worker returned EINTR (in
  // 11 of this case's 20 rounds). Deferred to the poller's take(), it
  // touches no other system call. Each round: the client writes
  // to a socket with a read pending on the worker while a task there is
  // busy for 300 us; the task then waits in an epoll set of its own that
  // stays empty: the wait must time out.
  urt::runtime rt(urt_test::synthetic_workers(1));
  loopback_pair link(rt);
  char buf[64];
  std::function<void()> read_on = [&] {
    link.server.async_read_some(asio::buffer(buf), [&](const std::error_code& ec, std::size_t) {
      if (!ec) read_on();
    });
  };
  read_on();
  int interrupted = 0;
  int timed_out = 0;
  for (int round = 0; round < 20; ++round) {
    std::promise<int> result;
    std::atomic<bool> running{false};
    rt.spawn({.priority = 10}, [&] {
      running.store(true);
      urt_test::spin_for(std::chrono::microseconds{300});
      const int own = ::epoll_create1(EPOLL_CLOEXEC);
      epoll_event ev{};
      const int n = ::epoll_wait(own, &ev, 1, 5);
      result.set_value(n < 0 ? -errno : n);
      ::close(own);
    });
    while (!running.load()) std::this_thread::yield();
    asio::write(link.client, asio::buffer("!", 1));
    const int n = result.get_future().get();
    if (n == -EINTR) ++interrupted;
    if (n == 0) ++timed_out;
  }
  link.server.close();
  rt.stop();
  CHECK(interrupted == 0);
  CHECK(timed_out == 20);
}
