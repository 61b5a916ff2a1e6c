// urt-kv: a Redis-protocol key-value server on urt, where control commands
// stay fast while bulk commands keep every worker busy.
//
//   urt-kv --port 6380                 # then: redis-cli -p 6380 PING
//   urt-kv --port 6381 --mode asio     # the same server on asio::thread_pool
//
// One coroutine per connection reads requests, runs them and writes the
// replies (pipelined requests: in order, one write per batch). What the two
// modes do differently is where a command runs:
//
//   urt   Every connection's socket lives on one worker's reactor, its
//         home (round robin at accept), and its coroutines and its closer
//         share a strand over an executor at --control-priority, so they
//         run one at a time; they run on whichever worker took the
//         completion in: the home, or an idle worker that polled the
//         reactor of a home busy in a long task or given no CPU by the OS
//         (a client on the same CPUs; DESIGN.md, "Worker-owned I/O"). A
//         bulk command (KEYS, WORK) is
//         a child coroutine at --bulk-priority on whichever worker placement
//         picks, and reaches a scheduling point every --slice-us: there the
//         worker takes in the I/O completions that arrived (a control
//         request), and when one is more urgent the bulk coroutine yields
//         (co_await urt::yield()) and the request runs first. So a control
//         request waits about one slice, not a whole bulk command.
//   asio  The baseline: an asio::thread_pool with as many threads, one
//         strand per connection, every command run to its end where it was
//         read. A control request waits for whatever bulk work is ahead.
//
// Both modes share the protocol (protocol.hpp), the commands
// (commands.hpp), the store (store.hpp: rculfhash, QSBR) and the metrics
// (metrics.hpp: INFO, and Prometheus text on --metrics-port).
//
// Limits (options.hpp): --max-clients (a connection past it gets -ERR and
// is closed), --max-request (a bigger request gets -ERR Protocol error and
// the connection is closed: the stream cannot be resynchronised),
// --idle-timeout (no byte read or written for that long, not counting the
// time its requests run: closed). A client that never reads its replies
// stalls only itself: its coroutine waits in its write, and the idle
// timeout closes it. A pipeline of bulk commands stops once its client has
// closed its socket (a write draws a reset); a half-closed client still
// gets every reply.
//
// Shutdown: SIGINT or SIGTERM closes the listening sockets and every
// connection (on the connection's own executor), waits for every coroutine
// to end, then stops the runtime with stop(drain) (or joins the pool) and
// exits 0.
//
// Asio comes first: every file of a program must include it in the same
// order (DESIGN.md, "Dependencies and their traps").
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <urt/executor.hpp>
#include <urt/urt.hpp>

#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <urcu/urcu-qsbr.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "commands.hpp"
#include "metrics.hpp"
#include "options.hpp"
#include "protocol.hpp"
#include "store.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// --- the two modes' types ---------------------------------------------------

struct urt_mode {
  static constexpr bool is_urt = true;
  // A strand per connection, as in the baseline: its tasks may run on any
  // worker, and a socket is not thread-safe.
  using executor = asio::strand<urt::executor>;
  using socket = asio::basic_stream_socket<asio::ip::tcp, executor>;
  using acceptor = asio::basic_socket_acceptor<asio::ip::tcp, executor>;
  using timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                           asio::wait_traits<std::chrono::steady_clock>, executor>;
  template <class T = void>
  using awaitable = asio::awaitable<T, executor>;
  static constexpr auto use_awaitable = asio::use_awaitable_t<executor>{};
  // urt's workers are QSBR readers already (online between parks).
  static void online() noexcept {}
  static void offline() noexcept {}
};

struct asio_mode {
  static constexpr bool is_urt = false;
  using executor = asio::any_io_executor;
  using socket = asio::ip::tcp::socket;
  using acceptor = asio::ip::tcp::acceptor;
  using timer = asio::steady_timer;
  template <class T = void>
  using awaitable = asio::awaitable<T>;
  static constexpr auto use_awaitable = asio::use_awaitable;

  // A pool thread registers with QSBR the first time it reads the store and
  // is online only while it runs commands: a thread parked in the reactor
  // while online would stall every grace period.
  struct registration {
    registration() noexcept {
      urcu_qsbr_register_thread();
      urcu_qsbr_thread_offline();
    }
    ~registration() { urcu_qsbr_unregister_thread(); }
  };
  static void online() noexcept {
    thread_local const registration mine;
    urcu_qsbr_thread_online();
  }
  static void offline() noexcept { urcu_qsbr_thread_offline(); }
};

// --- the server's state, shared by every coroutine ---------------------------

struct server {
  explicit server(const kv::options& o) : opt(o) {}

  kv::options opt;
  kv::store db;
  kv::server_counters counters;
  // Open /metrics connections (at most max_metrics_connections).
  std::atomic<std::int64_t> metrics_connected{0};
  const clock_type::time_point started = clock_type::now();
  unsigned port = 0;
  unsigned threads = 0;
  urt::runtime* rt = nullptr;                 // urt mode
  std::optional<urt::executor> bulk;          // urt mode: the bulk commands' executor

  // Coroutines still running (accept loops, connections, watchdogs); main
  // waits for 0 after a shutdown. On a condition variable, not
  // std::atomic::wait: SIGINT and SIGTERM go to main (urt's workers and
  // Asio's pool threads block them), and its wait must let asio's handler
  // run at once. Any blocking libc call does; under ThreadSanitizer, which
  // runs a handler only once the thread enters libc through one of its
  // wrappers, the raw futex syscall of std::atomic::wait does not.
  std::mutex live_mutex;
  std::condition_variable none_live;
  int live = 0;  // guarded by live_mutex
  void begin() {
    const std::lock_guard lock(live_mutex);
    ++live;
  }
  void end() {
    const std::lock_guard lock(live_mutex);
    if (--live == 0) none_live.notify_all();
  }

  // Open connections, as functions that close one on its own executor
  // (a socket is not thread-safe). Guarded by `mutex`.
  std::mutex mutex;
  bool stopping = false;
  std::list<std::function<void()>> closers;
  // `stopping` for the bulk commands, which look at it between slices on
  // other threads (relaxed: a flag, nothing is published with it).
  std::atomic<bool> shutting_down{false};

  [[nodiscard]] kv::metrics_view view() const {
    kv::metrics_view v;
    v.mode = rt != nullptr ? "urt" : "asio";
    v.port = port;
    v.threads = threads;
    v.max_clients = opt.max_clients;
    v.idle_timeout_s = static_cast<std::uint64_t>(opt.idle_timeout.count());
    v.uptime_s = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count());
    v.keys = db.size();
    v.priorities[0] = opt.control_priority;
    v.priorities[1] = opt.bulk_priority;
    v.counters = &counters;
    if (rt != nullptr) v.workers = rt->stats().workers;
    return v;
  }
};

template <class M>
struct connection {
  connection(typename M::socket s, typename M::timer t) : socket(std::move(s)), timer(std::move(t)) {}
  typename M::socket socket;
  typename M::timer timer;                     // --idle-timeout
  clock_type::time_point last = clock_type::now();  // last byte read or written
  bool busy = false;  // between a read and the write of its replies: not idle
  bool done = false;
  std::list<std::function<void()>>::iterator closer;
  // Set by close(): a bulk command running for it (on another executor in
  // urt mode) stops at its next slice (relaxed: a flag).
  std::atomic<bool> closed{false};

  void close() noexcept {
    closed.store(true, std::memory_order_relaxed);
    std::error_code ec;
    socket.close(ec);
    timer.cancel();
  }

  // Whether the client can no longer take a reply: the socket was closed
  // (the shutdown, the idle timeout) or the connection was reset, as a
  // peek shows (a write to a client that has closed its socket draws a
  // reset). The end of its stream alone is not departure: after a
  // half-close (nc -N, shutdown(SHUT_WR)) a client still reads its replies.
  [[nodiscard]] bool client_reset() noexcept {
    if (!socket.is_open()) return true;
    char byte = 0;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
};

// Registers `c` for the shutdown; false when the shutdown has begun.
template <class M>
bool enlist(server& s, const std::shared_ptr<connection<M>>& c) {
  std::lock_guard lock(s.mutex);
  if (s.stopping) return false;
  c->closer = s.closers.insert(s.closers.end(), [weak = std::weak_ptr(c)] {
    if (auto live = weak.lock()) {
      typename M::executor ex = live->socket.get_executor();
      asio::post(ex, [live] { live->close(); });
    }
  });
  return true;
}

template <class M>
void delist(server& s, connection<M>& c) {
  std::lock_guard lock(s.mutex);
  s.closers.erase(c.closer);
}

void shutdown(server& s) {
  std::lock_guard lock(s.mutex);
  s.stopping = true;
  s.shutting_down.store(true, std::memory_order_relaxed);
  for (auto& close : s.closers) close();
}

// --- bulk commands -----------------------------------------------------------

// Whether a bulk command may stop where it is: the server is shutting down
// or the connection was closed (by the shutdown or its idle timeout), so
// its reply would go nowhere. Looked at between slices: a shutdown waits
// for at most one slice (or one shard of KEYS) of each command running.
bool abandoned(const server& s, const std::atomic<bool>& closed) noexcept {
  return s.shutting_down.load(std::memory_order_relaxed) || closed.load(std::memory_order_relaxed);
}

// KEYS in urt mode: one shard at a time (no node is held across a
// scheduling point, store.hpp), with a scheduling point once a slice has
// passed. WORK: slices of spinning, a scheduling point after each. False
// when abandoned (nothing added to `out`).
urt::awaitable<bool> bulk_on_urt(server& s, kv::command_plan p, const std::atomic<bool>& closed,
                                 std::string& out) {
  if (p.bulk == kv::bulk_kind::keys) {
    std::string body;
    std::size_t count = 0;
    auto last = clock_type::now();
    for (unsigned shard = 0; shard < kv::store::shard_count; ++shard) {
      count += s.db.match_shard(shard, p.pattern, body);
      if (const auto now = clock_type::now(); now - last >= s.opt.slice) {
        if (abandoned(s, closed)) co_return false;
        if (urt::preempt_point()) co_await urt::yield();
        last = clock_type::now();
      }
    }
    kv::reply_array_header(out, count);
    out += body;
  } else {
    for (auto left = p.work; left > 0ns;) {
      const auto step = std::min<std::chrono::nanoseconds>(left, s.opt.slice);
      kv::spin_for(step);
      left -= step;
      if (left > 0ns && abandoned(s, closed)) co_return false;
      if (left > 0ns && urt::preempt_point()) co_await urt::yield();
    }
    kv::reply_simple(out, "OK");
  }
  co_return true;
}

// The same in the baseline: to the end, where the request was read, with
// the same looks at a shutdown (WORK in slices of 1 ms for them).
bool bulk_inline(server& s, const kv::command_plan& p, const std::atomic<bool>& closed,
                 std::string& out) {
  if (p.bulk == kv::bulk_kind::keys) {
    std::string body;
    std::size_t count = 0;
    for (unsigned shard = 0; shard < kv::store::shard_count; ++shard) {
      if (abandoned(s, closed)) return false;
      count += s.db.match_shard(shard, p.pattern, body);
    }
    kv::reply_array_header(out, count);
    out += body;
  } else {
    constexpr std::chrono::nanoseconds look_every = 1ms;
    for (auto left = p.work; left > 0ns;) {
      if (abandoned(s, closed)) return false;
      const auto step = std::min(left, look_every);
      kv::spin_for(step);
      left -= step;
    }
    kv::reply_simple(out, "OK");
  }
  return true;
}

// --- a connection -------------------------------------------------------------

// /metrics connections open at once; one more gets 503 and is closed.
constexpr std::int64_t max_metrics_connections = 8;

// A connection's read buffer (it grows up to --max-request for a request
// that needs it), and the reply buffer it keeps between reads.
constexpr std::size_t read_buffer = 16 * 1024;
constexpr std::size_t keep_buffer = 64 * 1024;

// Writes the replies gathered so far in the middle of a read's requests and
// clears them; `ec` says how the write ended. The connection counts as idle
// from the start of the write (a client that does not read is timed out),
// and busy again after it.
template <class M>
typename M::template awaitable<> flush_replies(connection<M>& c, std::string& out,
                                               std::error_code& ec) {
  M::offline();
  c.last = clock_type::now();
  c.busy = false;
  co_await asio::async_write(c.socket, asio::buffer(out),
                             asio::redirect_error(M::use_awaitable, ec));
  c.busy = true;
  M::online();
  out.clear();
  c.last = clock_type::now();
}

template <class M>
typename M::template awaitable<> session(server& s, std::shared_ptr<connection<M>> c) {
  const auto token = [](std::error_code& ec) { return asio::redirect_error(M::use_awaitable, ec); };
  kv::request_parser parser({.max_request = s.opt.max_request,
                             .max_args = 1024 * 1024,
                             .max_inline = std::min<std::size_t>(64 * 1024, s.opt.max_request)});
  kv::command_context ctx{s.db, s.counters, [&s] { return s.view(); }};
  std::vector<std::string_view> args;
  std::string out;
  std::vector<char> in(read_buffer);
  std::size_t begin = 0;  // in[begin, end): received, not yet parsed
  std::size_t end = 0;
  std::error_code ec;
  bool open = true;
  while (open) {
    const std::size_t n =
        co_await c->socket.async_read_some(asio::buffer(in.data() + end, in.size() - end), token(ec));
    if (ec) break;
    end += n;
    const auto arrival = clock_type::now();
    c->last = arrival;
    c->busy = true;  // the idle timeout waits while its requests run

    M::online();
    while (open && begin < end) {
      const kv::parse_result r = parser.parse({in.data() + begin, end - begin}, args);
      if (r.status == kv::parse_status::incomplete) break;
      begin += r.consumed;
      if (r.status == kv::parse_status::empty) continue;
      if (r.status == kv::parse_status::error) {
        s.counters.add(r.oversized ? s.counters.oversized : s.counters.protocol_errors);
        kv::reply_error(out, "ERR " + r.error);
        open = !r.fatal;
        continue;
      }
      const kv::command_plan p = kv::plan(args);
      if (p.bulk != kv::bulk_kind::none) {
        // A pipeline of bulk commands stops when its client has gone,
        // instead of running for nobody (and holding up the shutdown): the
        // replies of the requests before it in this read go out first, and
        // to a client that has closed its socket that write draws a reset.
        // One write and one peek before milliseconds of work.
        bool gone = !c->socket.is_open() || abandoned(s, c->closed);
        if (!gone && !out.empty()) {
          co_await flush_replies(*c, out, ec);
          gone = ec || c->client_reset();
        }
        if (gone) {
          open = false;  // its replies would go nowhere: drop the rest
          break;
        }
      }
      if (p.bulk == kv::bulk_kind::none) {
        open = kv::run_control(args, out, ctx);
      } else {
        bool ran = false;
        if constexpr (M::is_urt) {
          ran =
              co_await asio::co_spawn(*s.bulk, bulk_on_urt(s, p, c->closed, out), M::use_awaitable);
        } else {
          ran = bulk_inline(s, p, c->closed, out);
        }
        if (!ran) {
          open = false;  // abandoned: no reply, nothing more for this client
          break;
        }
      }
      s.counters.latency[static_cast<unsigned>(p.cls)].record(
          static_cast<std::uint64_t>((clock_type::now() - arrival).count()));
      if (out.size() >= 64 * 1024) {  // a long pipeline: do not buffer every reply
        co_await flush_replies(*c, out, ec);
        if (ec) open = false;
      }
    }
    M::offline();
    // Its requests ran: idle from now (a client that does not read its
    // replies is then timed out).
    c->last = clock_type::now();
    c->busy = false;
    if (!out.empty() && !ec) {
      co_await asio::async_write(c->socket, asio::buffer(out), token(ec));
      out.clear();
      if (ec) break;
    }
    c->last = clock_type::now();
    // A connection that once sent or got something big gives that memory
    // back while it idles (200 clients each GET of 1 MB held 200 MB).
    if (out.capacity() > keep_buffer) std::string().swap(out);

    // Room for the next read: move what is left to the front, or grow (a
    // request in progress never needs more than max_request bytes: the
    // parser rejects one that declares more).
    if (begin == end) {
      begin = end = 0;
    } else if (begin > 0) {
      std::memmove(in.data(), in.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    if (end == in.size()) in.resize(std::min(in.size() * 2, s.opt.max_request + 4096));
    if (end == 0 && in.size() > read_buffer) std::vector<char>(read_buffer).swap(in);
  }
  c->done = true;
  c->close();
}

// Closes the connection once nothing was read or written for the timeout.
template <class M>
typename M::template awaitable<> watchdog(server& s, std::shared_ptr<connection<M>> c,
                                          std::chrono::seconds timeout) {
  std::error_code ec;
  while (!c->done) {
    // Not while the connection's requests run (or their replies are being
    // written): a long WORK or a pipeline of them is not the client idling.
    c->timer.expires_at(c->busy ? clock_type::now() + timeout : c->last + timeout);
    co_await c->timer.async_wait(asio::redirect_error(M::use_awaitable, ec));
    if (c->done) break;
    if (!c->busy && clock_type::now() - c->last >= timeout) {
      s.counters.add(s.counters.idle_timeouts);
      c->close();
      break;
    }
  }
}

// The /metrics endpoint: one request per connection, then close.
template <class M>
typename M::template awaitable<> http_session(server& s, std::shared_ptr<connection<M>> c) {
  std::error_code ec;
  std::string request;
  char buf[2048];
  // The end of the headers: CRLF CRLF, or bare LFs (printf ... | nc), which
  // HTTP parsers accept too.
  const auto headers_end = [&request] {
    return request.find("\r\n\r\n") != std::string::npos ||
           request.find("\n\n") != std::string::npos;
  };
  // c->last stays at the accept: the 10 s the watchdog allows are for the
  // whole request, not per byte (one byte every 2 s kept it open for ever).
  while (!headers_end() && request.size() < 8192) {
    const std::size_t n = co_await c->socket.async_read_some(
        asio::buffer(buf), asio::redirect_error(M::use_awaitable, ec));
    if (ec) break;
    request.append(buf, n);
  }
  if (!ec) {
    std::string_view line = std::string_view(request).substr(0, request.find('\n'));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string status = "404 Not Found";
    std::string body = "urt-kv serves only GET /metrics\n";
    std::string type = "text/plain; charset=utf-8";
    std::string allow;
    // GET or HEAD (curl -I), with an HTTP version or without one.
    const bool head = line.starts_with("HEAD ");
    const std::string_view target = line.substr(head ? 5 : line.starts_with("GET ") ? 4 : 0);
    const bool metrics_path = target == "/metrics" || target.starts_with("/metrics ") ||
                              target.starts_with("/metrics?");
    if (!head && !line.starts_with("GET ")) {
      status = "405 Method Not Allowed";
      allow = "Allow: GET, HEAD\r\n";
    } else if (metrics_path) {
      status = "200 OK";
      M::online();
      body = kv::prometheus_text(s.view());
      M::offline();
      type = "text/plain; version=0.0.4; charset=utf-8";
    }
    std::string reply = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\n" + allow +
                        "Content-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n" + (head ? std::string() : body);
    co_await asio::async_write(c->socket, asio::buffer(reply), asio::redirect_error(M::use_awaitable, ec));
  }
  if (!ec) {
    // A close with request bytes still unread (headers past 8 KiB, junk
    // with no blank line) makes the kernel reset the connection and drop
    // the part of the reply not yet sent. Half-close instead, and read to
    // the client's end (the watchdog's 10 s bound it), then close.
    c->socket.shutdown(asio::socket_base::shutdown_send, ec);
    while (!ec) {
      co_await c->socket.async_read_some(asio::buffer(buf),
                                         asio::redirect_error(M::use_awaitable, ec));
    }
  }
  c->done = true;
  c->close();
}

// Starts a connection's coroutines, counted in s.live and in `open` (a
// client's in counters.connected, a /metrics one in metrics_connected).
template <class M, class Session>
void start(server& s, typename M::socket socket, Session session_fn, std::chrono::seconds timeout,
           std::atomic<std::int64_t>& open) {
  typename M::executor ex = socket.get_executor();
  auto c = std::make_shared<connection<M>>(std::move(socket), typename M::timer(ex));
  if (!enlist(s, c)) return;  // the shutdown began: close it at once
  open.fetch_add(1, std::memory_order_relaxed);
  s.begin();
  asio::co_spawn(ex, session_fn(s, c), [&s, c, &open](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "urt-kv: a connection failed: %s\n", x.what());
      }
    }
    delist(s, *c);
    open.fetch_sub(1, std::memory_order_relaxed);
    s.end();
  });
  if (timeout > 0s) {
    s.begin();
    asio::co_spawn(ex, watchdog<M>(s, c, timeout), [&s](std::exception_ptr) { s.end(); });
  }
}

// Accepts until the acceptor is closed; `next` gives each new connection
// its executor.
template <class M, class Next>
typename M::template awaitable<> accept_loop(server& s, typename M::acceptor& acceptor, Next next,
                                             bool metrics) {
  std::error_code ec;
  // Failed accepts (out of descriptors, say) are reported at most once a
  // second, with how many there were.
  clock_type::time_point reported{};
  std::uint64_t unreported = 0;
  for (;;) {
    typename M::socket socket =
        co_await acceptor.async_accept(next(), asio::redirect_error(M::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) break;
    if (ec) {  // let some connections end first
      ++unreported;
      if (const auto now = clock_type::now(); now - reported >= 1s) {
        std::fprintf(stderr, "urt-kv: accept: %s (%llu failed accepts since the last report)\n",
                     ec.message().c_str(), static_cast<unsigned long long>(unreported));
        reported = now;
        unreported = 0;
      }
      typename M::timer pause(acceptor.get_executor(), 10ms);
      co_await pause.async_wait(asio::redirect_error(M::use_awaitable, ec));
      continue;
    }
    if (metrics) {
      // Bounded: the descriptors fit_max_clients() keeps for the server
      // leave room for this many (30 slow ones took the clients' own).
      if (s.metrics_connected.load(std::memory_order_relaxed) >= max_metrics_connections) {
        static constexpr std::string_view busy =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        std::error_code ignored;
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(busy), ignored);
        continue;
      }
      start<M>(s, std::move(socket), http_session<M>, 10s, s.metrics_connected);
      continue;
    }
    if (s.counters.connected.load(std::memory_order_relaxed) >=
        static_cast<std::int64_t>(s.opt.max_clients)) {
      s.counters.add(s.counters.rejected);
      static constexpr std::string_view refused = "-ERR max number of clients reached\r\n";
      std::error_code ignored;
      socket.non_blocking(true, ignored);  // a new socket's buffer takes it: never wait
      socket.write_some(asio::buffer(refused), ignored);
      continue;  // closed by the socket's destructor
    }
    s.counters.add(s.counters.connections);  // as Redis: refused ones are not counted here
    // As Redis: no Nagle delay. A read's replies can leave in more than one
    // write (before a KEYS or WORK, every 64 KiB); without this the second
    // waited for the client's delayed ACK, 40 ms per round trip.
    std::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    start<M>(s, std::move(socket), session<M>, s.opt.idle_timeout, s.counters.connected);
  }
  s.end();
}

// The first `n` CPUs this process may run on, as a cpulist.
std::string first_cpus(unsigned n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
  std::string list;
  unsigned found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < n; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    list += (list.empty() ? "" : ",") + std::to_string(cpu);
    ++found;
  }
  if (found < n) {
    throw kv::usage_error("--threads: " + std::to_string(n) + " is more than the " +
                          std::to_string(found) + " CPUs this process may use");
  }
  return list;
}

unsigned allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

void announce(const server& s, std::optional<unsigned> metrics_port) {
  std::printf("listening on 127.0.0.1:%u\n", s.port);
  if (metrics_port) std::printf("metrics on http://127.0.0.1:%u/metrics\n", *metrics_port);
  std::fflush(stdout);
}

void wait_for_coroutines(server& s) {
  std::unique_lock lock(s.live_mutex);
  s.none_live.wait(lock, [&s] { return s.live == 0; });
}

// As Redis: --max-clients needs that many descriptors besides the server's
// own: 7 at start and 6 per worker (/proc/PID/fd of urt-kv with a metrics
// port: 19 with two workers, 13 with one without), and room for the
// max_metrics_connections /metrics connections: 32 + 6 per worker. Raise
// the soft open-file limit as far as the hard one allows, else lower
// --max-clients to fit and say so: a client over it then gets "max number
// of clients reached" instead of an accept that fails and leaves it waiting.
void fit_max_clients(kv::options& o) {
  const unsigned threads = o.threads != 0 ? o.threads : allowed_cpus();
  const rlim_t reserve = 32 + 6 * static_cast<rlim_t>(threads);
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const rlim_t want = static_cast<rlim_t>(o.max_clients) + reserve;
  if (rl.rlim_cur < want) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur >= want) return;
  if (rl.rlim_cur <= reserve) {
    throw kv::usage_error("--max-clients: the open-file limit (ulimit -n) is " +
                          std::to_string(rl.rlim_cur) + ", which leaves no descriptor for clients (" +
                          std::to_string(reserve) + " are the server's own)");
  }
  const auto fits = static_cast<std::size_t>(rl.rlim_cur - reserve);
  std::fprintf(stderr,
               "urt-kv: --max-clients %zu lowered to %zu: the open-file limit (ulimit -n) is %llu, "
               "%llu of them the server's own\n",
               o.max_clients, fits, static_cast<unsigned long long>(rl.rlim_cur),
               static_cast<unsigned long long>(reserve));
  o.max_clients = fits;
}

// An acceptor on 127.0.0.1:port; a port that cannot be had names the option.
template <class Acceptor, class Executor>
Acceptor listen_on(const Executor& ex, unsigned port, const char* option) {
  try {
    return Acceptor(ex, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  } catch (const std::system_error& e) {
    throw std::runtime_error(std::string(option) + " " + std::to_string(port) +
                             ": cannot listen on 127.0.0.1:" + std::to_string(port) + ": " +
                             e.code().message());
  }
}

int run_urt(server& s) {
  urt::runtime_options ro;
  if (s.opt.threads != 0) ro.cpus = first_cpus(s.opt.threads);
  ro.idle_spin = s.opt.idle_spin;
  ro.binding = s.opt.binding;
  urt::runtime rt(ro);
  s.rt = &rt;
  s.threads = static_cast<unsigned>(rt.worker_count());
  s.bulk.emplace(rt.executor({.priority = s.opt.bulk_priority}));
  // Each worker's control executor: its I/O lives on that worker, its
  // tasks run on any worker (runtime::executor with a home).
  std::vector<urt::executor> per_worker;
  for (unsigned w = 0; w < s.threads; ++w) {
    per_worker.push_back(rt.executor({.priority = s.opt.control_priority}, w));
  }
  {
    // I/O objects are declared after the runtime: they must go before it.
    // The listeners and the signals share one strand (the handler closes
    // the listeners).
    const urt_mode::executor control = asio::make_strand(per_worker[0]);
    urt_mode::acceptor acceptor = listen_on<urt_mode::acceptor>(control, s.opt.port, "--port");
    s.port = acceptor.local_endpoint().port();
    std::optional<urt_mode::acceptor> metrics;
    std::optional<unsigned> metrics_port;
    if (s.opt.metrics_port) {
      metrics.emplace(
          listen_on<urt_mode::acceptor>(control, *s.opt.metrics_port, "--metrics-port"));
      metrics_port = metrics->local_endpoint().port();
    }
    asio::basic_signal_set<urt_mode::executor> signals(control, SIGINT, SIGTERM);
    signals.async_wait([&](const std::error_code&, int) {
      shutdown(s);
      acceptor.close();
      if (metrics) metrics->close();
    });
    unsigned next = 0;
    const auto round_robin = [&] { return asio::make_strand(per_worker[next++ % per_worker.size()]); };
    const auto on_first = [&] { return asio::make_strand(per_worker[0]); };
    s.begin();
    asio::co_spawn(control, accept_loop<urt_mode>(s, acceptor, round_robin, false), asio::detached);
    if (metrics) {
      s.begin();
      asio::co_spawn(control, accept_loop<urt_mode>(s, *metrics, on_first, true), asio::detached);
    }
    announce(s, metrics_port);
    wait_for_coroutines(s);
  }
  s.bulk.reset();
  per_worker.clear();
  s.rt = nullptr;
  rt.stop();  // no I/O is left: every accepted task runs, then the workers exit
  return 0;
}

int run_asio(server& s) {
  s.threads = s.opt.threads != 0 ? s.opt.threads : allowed_cpus();
  asio::thread_pool pool(s.threads);
  {
    const auto control = asio::make_strand(pool);
    asio::ip::tcp::acceptor acceptor =
        listen_on<asio::ip::tcp::acceptor>(control, s.opt.port, "--port");
    s.port = acceptor.local_endpoint().port();
    std::optional<asio::ip::tcp::acceptor> metrics;
    std::optional<unsigned> metrics_port;
    if (s.opt.metrics_port) {
      metrics.emplace(
          listen_on<asio::ip::tcp::acceptor>(control, *s.opt.metrics_port, "--metrics-port"));
      metrics_port = metrics->local_endpoint().port();
    }
    // The signals are waited for on this thread, not in the pool: a pool
    // whose threads all run bulk commands would run the handler only once
    // one of them ended (seconds of WORK), and the commands look for the
    // shutdown between slices. The listeners are closed on their strand.
    asio::io_context signal_io{1};
    asio::signal_set signals(signal_io, SIGINT, SIGTERM);
    signals.async_wait([&](const std::error_code&, int) {
      shutdown(s);
      asio::post(control, [&] {
        acceptor.close();
        if (metrics) metrics->close();
      });
    });
    const auto own_strand = [&pool] { return asio::any_io_executor(asio::make_strand(pool)); };
    s.begin();
    asio::co_spawn(control, accept_loop<asio_mode>(s, acceptor, own_strand, false), asio::detached);
    if (metrics) {
      s.begin();
      asio::co_spawn(control, accept_loop<asio_mode>(s, *metrics, own_strand, true), asio::detached);
    }
    announce(s, metrics_port);
    signal_io.run();  // until the signal's handler has run
    wait_for_coroutines(s);
  }
  pool.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kv::options o;
  try {
    o = kv::parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const kv::usage_error& e) {
    std::fprintf(stderr, "urt-kv: %s\n%s", e.what(), kv::usage_text());
    return 2;
  }
  if (o.help) {
    std::fputs(kv::usage_text(), stdout);
    return 0;
  }
  try {
    fit_max_clients(o);
    server s(o);
    return o.mode == kv::server_mode::urt ? run_urt(s) : run_asio(s);
  } catch (const kv::usage_error& e) {
    std::fprintf(stderr, "urt-kv: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // the port is in use, say
    std::fprintf(stderr, "urt-kv: %s\n", e.what());
    return 1;
  }
}
