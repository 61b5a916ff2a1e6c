// echo_server: the smallest coroutine TCP echo server on urt.
//
//   urt-echo-server PORT      (0: the system picks a free port)
//
// It listens on 127.0.0.1:PORT, prints "listening on 127.0.0.1:<port>", and
// writes back whatever each connection sends, one coroutine per connection.
// On SIGINT or SIGTERM it closes every socket, waits for the coroutines to
// end, stops the runtime and exits 0. A PORT that is not 0..65535: exit 2.
// --help (or -h) prints the usage line and exits 0.
//
// What it shows (README.md, "Asio: executors, coroutines and worker-owned
// I/O"): a urt::executor is an Asio executor whose every handler, a
// coroutine's resumption included, runs as a urt task at the executor's
// priority; a socket made with it completes on the executor's worker.
//
// Asio comes first: every file of a program must include it in the same
// order (DESIGN.md, "Dependencies and their traps").
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/write.hpp>
#include <urt/executor.hpp>
#include <urt/urt.hpp>

#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <exception>
#include <list>
#include <mutex>
#include <string_view>
#include <system_error>

namespace {

// The open connections. Only tasks of the server's one worker touch it (see
// main), so it needs no lock; a list, so that a socket never moves.
using connections = std::list<urt::net::tcp_socket>;

// One connection: write back what it reads until the read or the write
// fails: the peer closed or reset it, or the shutdown closed the socket.
// Each co_await suspends the coroutine; the socket's completion arrives on
// the worker that owns the socket and resumes it as a task at priority 50.
urt::awaitable<void> echo(urt::net::tcp_socket& socket) {
  const auto or_error = [](std::error_code& ec) {  // errors as values, not exceptions
    return asio::redirect_error(urt::use_awaitable, ec);
  };
  std::error_code ec;
  char data[4096];
  while (!ec) {
    const std::size_t n = co_await socket.async_read_some(asio::buffer(data), or_error(ec));
    if (!ec) co_await asio::async_write(socket, asio::buffer(data, n), or_error(ec));
  }
}

// The coroutines still running: the listener and one per connection. main
// waits for none. On a condition variable, not std::atomic::wait: SIGINT
// and SIGTERM go to main (the workers block them: runtime_options::
// block_signals), and its wait must let asio's handler run at once. Any
// blocking libc call does; under ThreadSanitizer, which runs a handler
// only once the thread enters libc through one of its wrappers, the raw
// futex syscall of std::atomic::wait does not, and the server hung.
class live_count {
 public:
  void add() {
    const std::lock_guard lock(mutex_);
    ++count_;
  }
  void ended() {
    const std::lock_guard lock(mutex_);
    if (--count_ == 0) none_.notify_all();
  }
  void wait_for_none() {
    std::unique_lock lock(mutex_);
    none_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable none_;
  int count_ = 1;  // the listener
};

// Accepts until the acceptor is closed, and co_spawns a coroutine for each
// connection on the acceptor's executor: same worker, same priority.
urt::awaitable<void> listen(urt::net::tcp_acceptor& acceptor, connections& open,
                            live_count& live) {
  for (;;) {
    std::error_code ec;
    urt::net::tcp_socket socket =
        co_await acceptor.async_accept(asio::redirect_error(urt::use_awaitable, ec));
    if (ec) break;  // closed by the shutdown (or, say, out of descriptors)
    const auto it = open.insert(open.end(), std::move(socket));
    live.add();
    asio::co_spawn(acceptor.get_executor(), echo(*it), [&open, &live, it](std::exception_ptr) {
      open.erase(it);  // the coroutine has ended: close and forget its socket
      live.ended();
    });
  }
  live.ended();
}

}  // namespace

int main(int argc, char** argv) try {
  constexpr const char* usage = "usage: urt-echo-server PORT   (0..65535; 0 picks a free port)\n";
  if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h")) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc != 2) {
    std::fputs(usage, stderr);
    return 2;
  }
  const std::string_view arg = argv[1];
  unsigned port = 0;
  const auto [end, error] = std::from_chars(arg.data(), arg.data() + arg.size(), port);
  if (error == std::errc::invalid_argument || end != arg.data() + arg.size()) {
    std::fprintf(stderr, "urt-echo-server: PORT \"%s\" is not a number (0..65535)\n", argv[1]);
    return 2;
  }
  if (error == std::errc::result_out_of_range || port > 65535) {
    std::fprintf(stderr, "urt-echo-server: PORT \"%s\" is outside 0..65535\n", argv[1]);
    return 2;
  }

  urt::runtime rt;  // one worker per CPU this process may use
  // The whole server lives on worker 0: its acceptor, sockets, coroutines
  // and signal handler are all tasks of that one worker, so they never run
  // at the same time (as on an Asio strand) and share `open` without a lock.
  // Priority 50 puts them above normal work (0) and behind anything more
  // urgent queued on worker 0. A server for many cores would give each
  // connection its own worker: async_accept(rt.executor({...}), token).
  const urt::executor ex = rt.executor({.priority = 50, .affinity = urt::worker_set{0}});

  // I/O objects are declared after the runtime: they must go before it.
  urt::net::tcp_acceptor acceptor(
      ex, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const unsigned bound = acceptor.local_endpoint().port();
  connections open;
  live_count live;

  // The signal's handler, a task of worker 0 like the rest, closes the
  // acceptor and every socket: each coroutine's pending operation then
  // fails (operation_aborted) and the coroutine ends.
  asio::basic_signal_set<urt::executor> signals(ex, SIGINT, SIGTERM);
  signals.async_wait([&](const std::error_code&, int) {
    acceptor.close();
    for (urt::net::tcp_socket& s : open) s.close();
  });
  asio::co_spawn(ex, listen(acceptor, open, live), asio::detached);

  std::printf("listening on 127.0.0.1:%u\n", bound);
  std::fflush(stdout);
  live.wait_for_none();
  rt.stop();  // no I/O is left: every accepted task runs, then the workers exit
  return 0;
} catch (const std::exception& e) {  // e.g. the port is in use
  std::fprintf(stderr, "urt-echo-server: %s\n", e.what());
  return 1;
}
