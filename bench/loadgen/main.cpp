// urt-loadgen: an open-loop load generator for urt-kv (examples/kv_server),
// run against urt-kv --mode urt and its plain Asio baseline (--mode asio)
// in one run, or against servers already running (--target, e.g. a
// redis-server with --bulk=keys:*).
//
//   urt-loadgen --server build/release/examples/urt-kv --svg loadgen.svg
//
// What it sends. B bulk connections send WORK <us> (CPU-bound on the
// server) or KEYS <pattern>; C control connections send PING and GET of a
// key SET beforehand, alternating. Every connection pipelines: it sends
// each request at its intended time whether or not earlier replies came
// back, keeps a FIFO of the intended send times, and matches the replies
// in order (RESP2, parsed incrementally: resp.hpp). A reply that is an
// error ('-', or an array holding one) or not what the command returns
// (+PONG, a non-null bulk string, +OK, an array) counts as an error.
//
// Open loop, and coordinated omission. The send times are fixed in advance:
// connection i of n in a group sends every n/R seconds (R: the group's
// total rate), its phase offset by i/n of that interval, so the group's
// requests are evenly spaced. Latency = the time the reply was read -
// the request's *intended* send time (std::chrono::steady_clock). A
// closed-loop client (send, wait, send) stops asking while the server
// stalls, so a stall costs it one slow sample; here every request that
// should have been sent during the stall waits for it and is counted, as
// wrk2 and Lancet do. When the client itself runs late (this machine's
// CPUs are shared with the server) it sends at once and the lateness still
// counts in the latency; the "lag p99" column shows how late it sent, so a
// latency the client caused can be told apart.
//
// Capacity and the sweep. For each server, first a closed-loop capacity run:
// the B bulk connections keep 2 requests in flight each (the next one is
// sent as soon as a reply arrives), --warmup unmeasured, then
// --capacity-duration measured; capacity = bulk replies per second. 100% is
// the baseline's capacity (asio's by default; --baseline), and every server
// then gets the same absolute offered bulk rates (so the points line up):
// for each --points P, bulk requests at P% of it for --warmup (sent, not
// measured) and --duration (measured), control at --control-rate per
// connection throughout; then no more requests, and every reply is awaited
// (a connection without a reply for --timeout is an error, never a hang).
// Past 100% the offered bulk load exceeds what the baseline can do, its
// queue grows for the whole point, and the achieved bulk/s shows the
// server's throughput under overload.
//
// Rounds. The sweep runs --rounds times (3 by default), the servers taking
// turns sweep by sweep (each started afresh, keys SET again; the capacity
// runs only in the first round), and a point's figures are over the
// samples of all its rounds together: three times the samples for its p99,
// and a machine whose speed drifts during the run (a shared VM: by 20%
// within minutes) weighs on every server alike rather than on whichever
// ran while it was slow. Each round's control p99 is printed as it ends
// and kept in --json (control_p99_us_by_round).
//
// Servers. With --server PATH (urt-kv), each of --modes (default urt,asio)
// is started in turn as PATH --port 0 --mode M plus --server-args, on
// --server-cpus when given; its port is read from its "listening on" line;
// after its points it gets SIGTERM and must exit 0. The baseline runs
// first in each round (its capacity sets every rate). The load generator
// is one thread (epoll, a timerfd for the send times; --spin-us:
// busy-polling instead near a send), on --client-cpus and at SCHED_FIFO
// --client-priority when given. On a machine with few CPUs the client
// competes with the server's threads (the lag column shows it):
// --server-cpus, --client-cpus and --server-args=--threads=N split them,
// --client-priority lets the client preempt them.
//
// Reading the table. One row per point and server: the offered bulk rate
// (the same for every server), the bulk replies/s received within the
// measured window, control latency p50/p99/p99.9/max in us (exact
// nearest-rank percentiles of every measured control request), the client's
// send lag p99, the errors, and the ratios to the baseline at the same
// point: control p99 (below 1: the server kept control requests faster) and
// bulk/s (1: the same throughput). A server that gives control requests
// priority over bulk work shows a flat control p99 as the bulk load rises;
// one that runs bulk work to the end shows control p99 rising towards a
// whole WORK (or a queue of them) once its threads are busy.
//
// Exit status: 0 when every request got its reply and none was an error and
// every started server exited 0 on SIGTERM; 1 otherwise (stderr says what);
// 2 on a bad command line (the message names the flag and the value); 130
// when interrupted (the started server is stopped first).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "resp.hpp"

namespace {

using namespace loadgen;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using std::chrono::nanoseconds;

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_signal(int /*sig*/) { g_interrupted = 1; }

/// SIGINT or SIGTERM arrived: stop the server and exit 130.
struct interrupted {};

/// The run against one server cannot go on (connection lost, a reply
/// missing, a protocol error, the server's exit): the message says why.
struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// --- requests -----------------------------------------------------------------

enum class kind : std::uint8_t { ping, get, set, bulk };

const char* kind_name(kind k, const options& o) {
  switch (k) {
    case kind::ping: return "PING";
    case kind::get: return "GET";
    case kind::set: return "SET";
    case kind::bulk: return o.bulk == bulk_command::work ? "WORK" : "KEYS";
  }
  return "?";
}

void append_command(std::string& out, std::initializer_list<std::string_view> words) {
  out += '*';
  out += std::to_string(words.size());
  out += "\r\n";
  for (const std::string_view w : words) {
    out += '$';
    out += std::to_string(w.size());
    out += "\r\n";
    out += w;
    out += "\r\n";
  }
}

std::string key_name(std::uint64_t i) { return "loadgen:key:" + std::to_string(i); }

// Empty when `r` is what `k` returns; else the problem, for the error count.
std::string check_reply(kind k, const resp::reply& r, const options& o) {
  const std::string cmd = kind_name(k, o);
  if (r.error) {
    return r.type == '-' ? "error reply to " + cmd + ": " + std::string(r.text)
                         : "an array with an error in it in reply to " + cmd;
  }
  bool ok = false;
  switch (k) {
    case kind::ping: ok = r.type == '+' && r.text == "PONG"; break;
    case kind::get: ok = r.type == '$' && !r.null; break;
    case kind::set: ok = r.type == '+' && r.text == "OK"; break;
    case kind::bulk:
      ok = o.bulk == bulk_command::work ? r.type == '+' && r.text == "OK" : r.type == '*' && !r.null;
      break;
  }
  if (ok) return {};
  std::string got(1, r.type);
  if (r.type == '+') got += std::string(r.text);
  if (r.null) got += "-1 (null)";
  return "unexpected reply to " + cmd + ": " + got;
}

// --- one phase's schedule and its tallies --------------------------------------

struct phase {
  bool closed_loop = false;   ///< the capacity run: bulk only, 2 in flight per connection
  time_point start, measure_from, stop;  ///< sends in [start, stop); measured: intended in [measure_from, stop)
  nanoseconds control_interval{0};       ///< per control connection; 0: control idle
  nanoseconds bulk_interval{0};          ///< per bulk connection (open loop); 0: bulk idle
};

struct tally {
  std::vector<std::int64_t> control_ns, bulk_ns, lag_ns;
  std::uint64_t control_sent = 0, bulk_sent = 0, bulk_in_window = 0;
  std::uint64_t control_errors = 0, bulk_errors = 0;

  // Adds another phase's samples and counts (a point's rounds, pooled).
  void add(const tally& t) {
    control_ns.insert(control_ns.end(), t.control_ns.begin(), t.control_ns.end());
    bulk_ns.insert(bulk_ns.end(), t.bulk_ns.begin(), t.bulk_ns.end());
    lag_ns.insert(lag_ns.end(), t.lag_ns.begin(), t.lag_ns.end());
    control_sent += t.control_sent;
    bulk_sent += t.bulk_sent;
    bulk_in_window += t.bulk_in_window;
    control_errors += t.control_errors;
    bulk_errors += t.bulk_errors;
  }
};

struct connection {
  int fd = -1;
  bool bulk = false;
  unsigned index = 0;  ///< within its group
  std::string out;     ///< requests not yet written
  std::size_t out_sent = 0;
  bool watching_out = false;
  resp::reply_parser parser;
  struct pending {
    time_point intended;
    kind what;
    bool measured;
  };
  std::deque<pending> fifo;  ///< sent, reply not yet read
  bool scheduled = false;
  time_point next{};
  nanoseconds interval{0};
  std::uint64_t seq = 0;     ///< control: even PING, odd GET
  time_point progress{};     ///< the last reply, or when the FIFO stopped being empty

  [[nodiscard]] std::string label() const {
    return std::string(bulk ? "bulk" : "control") + " connection " + std::to_string(index);
  }
};

// --- the connections to one server, and the event loop ---------------------------

class session {
 public:
  session(const options& o, unsigned bulk_conns, std::string host, std::uint16_t port)
      : o_(o),
        spin_us_(client_spin_us(o)),
        bulk_conns_(bulk_conns),
        host_(std::move(host)),
        port_(port) {
    if (o.bulk == bulk_command::work) {
      append_command(bulk_request_, {"WORK", std::to_string(o.work_us)});
    } else {
      append_command(bulk_request_, {"KEYS", o.keys_pattern});
    }
    append_command(ping_request_, {"PING"});
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() {
    for (const connection& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
    }
    if (timer_ >= 0) ::close(timer_);
    if (ep_ >= 0) ::close(ep_);
  }

  void connect_all() {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep_ < 0 || timer_ < 0) throw failure(errno_text("epoll/timerfd"));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = timer_tag;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, timer_, &ev) != 0) throw failure(errno_text("epoll_ctl"));

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(port_);
    if (const int rc = ::getaddrinfo(host_.c_str(), port.c_str(), &hints, &found); rc != 0) {
      throw failure("cannot resolve " + host_ + ": " + ::gai_strerror(rc));
    }
    conns_.resize(o_.control_conns + bulk_conns_);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      connection& c = conns_[i];
      c.bulk = i >= o_.control_conns;
      c.index = static_cast<unsigned>(c.bulk ? i - o_.control_conns : i);
      std::string why = "no address";
      for (addrinfo* a = found; a != nullptr && c.fd < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
          why = errno_text("socket");
          continue;
        }
        const timeval limit{.tv_sec = 3, .tv_usec = 0};  // bounds a blocking connect()
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          why = errno_text("connect");
          ::close(fd);
          continue;
        }
        c.fd = fd;
      }
      if (c.fd < 0) {
        ::freeaddrinfo(found);
        throw failure("cannot connect " + c.label() + " to " + host_ + ":" + port + ": " + why);
      }
      const int one = 1;
      ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
      epoll_event cev{};
      cev.events = EPOLLIN | EPOLLRDHUP;
      cev.data.u64 = i;
      if (::epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &cev) != 0) {
        ::freeaddrinfo(found);
        throw failure(errno_text("epoll_ctl"));
      }
    }
    ::freeaddrinfo(found);
  }

  /// SETs the keys GET reads, pipelined on control connection 0; returns
  /// the error replies.
  std::uint64_t preload() {
    phase ph;
    ph.start = ph.measure_from = ph.stop = clock_type::now();
    ph_ = &ph;
    tally t;
    t_ = &t;
    connection& c = conns_[0];
    for (unsigned k = 0; k < o_.keys; ++k) {
      append_command(c.out, {"SET", key_name(k), "loadgen-value-" + std::to_string(k)});
      enqueue(c, kind::set, ph.start, ph.start, false);
      if (c.out.size() > 64 * 1024) flush(c);
    }
    flush(c);
    loop(ph);
    return t.control_errors;
  }

  tally run(const phase& ph) {
    tally t;
    ph_ = &ph;
    t_ = &t;
    for (connection& c : conns_) {
      const nanoseconds iv = c.bulk ? (ph.closed_loop ? 0ns : ph.bulk_interval) : ph.control_interval;
      c.scheduled = iv > 0ns;
      if (!c.scheduled) continue;
      const unsigned n = c.bulk ? bulk_conns_ : o_.control_conns;
      c.interval = iv;
      c.next = ph.start + nanoseconds(iv.count() * c.index / n);  // phases spread evenly
    }
    if (ph.closed_loop) {
      const time_point now = clock_type::now();
      for (connection& c : conns_) {
        if (!c.bulk) continue;
        for (int d = 0; d < 2; ++d) enqueue(c, kind::bulk, now, now, true);
        flush(c);
      }
    }
    loop(ph);
    for (connection& c : conns_) c.scheduled = false;
    return t;
  }

 private:
  static constexpr std::uint64_t timer_tag = ~std::uint64_t{0};

  void enqueue(connection& c, kind k, time_point intended, time_point now, bool write_request) {
    if (write_request) {
      if (k == kind::bulk) {
        c.out += bulk_request_;
      } else if (k == kind::ping) {
        c.out += ping_request_;
      } else if (k == kind::get) {
        append_command(c.out, {"GET", key_name((c.index + c.seq / 2) % o_.keys)});
      }
    }
    const bool measured = intended >= ph_->measure_from && intended < ph_->stop;
    if (c.fifo.empty()) c.progress = now;
    c.fifo.push_back({intended, k, measured});
    if (k == kind::bulk) {
      ++t_->bulk_sent;
    } else if (k != kind::set) {
      ++t_->control_sent;
    }
    if (measured) t_->lag_ns.push_back((now - intended).count());
  }

  void watch_out(connection& c, bool on) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
    ev.data.u64 = static_cast<std::uint64_t>(&c - conns_.data());
    if (::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev) != 0) throw failure(errno_text("epoll_ctl"));
    c.watching_out = on;
  }

  void flush(connection& c) {
    while (c.out_sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!c.watching_out) watch_out(c, true);
        return;
      } else {
        throw failure(c.label() + ": " + errno_text("send"));
      }
    }
    c.out.clear();
    c.out_sent = 0;
    if (c.watching_out) watch_out(c, false);
  }

  void on_reply(connection& c, const resp::reply& r, time_point at) {
    if (c.fifo.empty()) {
      // A server that refuses the connection (Redis's and urt-kv's "max
      // number of clients reached") replies before any request: say what.
      throw failure(c.label() + ": a reply came with no request outstanding" +
                    (r.type == '-' ? ": -" + std::string(r.text) : std::string()));
    }
    const connection::pending p = c.fifo.front();
    c.fifo.pop_front();
    c.progress = at;
    const bool bulk = p.what == kind::bulk;
    if (std::string problem = check_reply(p.what, r, o_); !problem.empty()) {
      ++(bulk ? t_->bulk_errors : t_->control_errors);
      if (first_error.empty()) first_error = std::move(problem);
    }
    if (p.measured) (bulk ? t_->bulk_ns : t_->control_ns).push_back((at - p.intended).count());
    if (bulk && at >= ph_->measure_from && at < ph_->stop) ++t_->bulk_in_window;
    if (bulk && ph_->closed_loop && at < ph_->stop) enqueue(c, kind::bulk, at, at, true);
  }

  void read_all(connection& c) {
    for (;;) {
      const ssize_t n = ::recv(c.fd, buffer_.data(), buffer_.size(), 0);
      if (n > 0) {
        const time_point at = clock_type::now();
        const bool ok = c.parser.feed(std::string_view(buffer_.data(), static_cast<std::size_t>(n)),
                                      [&](const resp::reply& r) { on_reply(c, r, at); });
        if (!ok) throw failure(c.label() + ": a malformed reply: " + c.parser.error());
        if (static_cast<std::size_t>(n) < buffer_.size()) break;  // drained, most likely
        continue;
      }
      if (n == 0) {
        throw failure("the server closed " + c.label() + " (" + std::to_string(c.fifo.size()) +
                      " requests outstanding)");
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      throw failure(c.label() + ": " + errno_text("recv"));
    }
    if (!c.out.empty()) flush(c);
  }

  [[nodiscard]] bool all_answered() const {
    return std::all_of(conns_.begin(), conns_.end(),
                       [](const connection& c) { return c.fifo.empty() && c.out.empty(); });
  }

  void check_progress(time_point now) const {
    const nanoseconds limit = ns_of(o_.timeout_s);
    for (const connection& c : conns_) {
      if (!c.fifo.empty() && now - c.progress > limit) {
        throw failure("no reply for " + seconds(o_.timeout_s) + " on " + c.label() + " (" +
                      std::to_string(c.fifo.size()) + " requests outstanding, the oldest a " +
                      kind_name(c.fifo.front().what, o_) + ")");
      }
    }
  }

  void arm(time_point when) {
    if (when == armed_) return;
    const auto d = when.time_since_epoch();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
    spec.it_value.tv_nsec = static_cast<long>((d % 1s).count());
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    if (::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) throw failure(errno_text("timerfd_settime"));
    armed_ = when;
  }

  // Sends on schedule until ph.stop, then waits until every request got
  // its reply.
  void loop(const phase& ph) {
    std::array<epoll_event, 64> events{};
    for (;;) {
      if (g_interrupted != 0) throw interrupted{};
      const time_point now = clock_type::now();
      time_point wake = now + 20ms;  // at least this often: the --timeout check
      for (connection& c : conns_) {
        if (!c.scheduled) continue;
        bool queued = false;
        while (c.next <= now && c.next < ph.stop) {
          kind k = kind::bulk;
          if (!c.bulk) k = c.seq++ % 2 == 0 ? kind::ping : kind::get;
          enqueue(c, k, c.next, now, true);
          c.next += c.interval;
          queued = true;
        }
        if (queued) flush(c);
        if (c.next < ph.stop) wake = std::min(wake, c.next);
      }
      if (now < ph.stop) {
        wake = std::min(wake, ph.stop);
      } else if (all_answered()) {
        break;
      }
      check_progress(now);
      // --spin-us: close to the next send, poll instead of sleeping (no
      // wake-up latency, for the sends nor for the replies).
      const bool spin = spin_us_ == spin_always ||
                        (spin_us_ != 0 && wake - now <= std::chrono::microseconds(spin_us_));
      if (!spin) arm(wake);
      const int n = ::epoll_wait(ep_, events.data(), static_cast<int>(events.size()), spin ? 0 : 100);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw failure(errno_text("epoll_wait"));
      }
      for (int i = 0; i < n; ++i) {
        if (events[static_cast<std::size_t>(i)].data.u64 == timer_tag) {
          std::uint64_t ticks = 0;
          [[maybe_unused]] const ssize_t got = ::read(timer_, &ticks, sizeof ticks);
          armed_ = time_point{};
          continue;
        }
        connection& c = conns_[events[static_cast<std::size_t>(i)].data.u64];
        const std::uint32_t what = events[static_cast<std::size_t>(i)].events;
        if ((what & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0) read_all(c);
        if ((what & EPOLLOUT) != 0) flush(c);
      }
    }
    for (const connection& c : conns_) {
      if (!c.parser.idle()) throw failure(c.label() + ": a reply to no request began");
    }
  }

  const options& o_;
  const std::uint32_t spin_us_;  // client_spin_us(o_)
  unsigned bulk_conns_;
  std::string host_;
  std::uint16_t port_;
  std::string bulk_request_;
  std::string ping_request_;
  std::vector<connection> conns_;
  int ep_ = -1;
  int timer_ = -1;
  time_point armed_{};
  const phase* ph_ = nullptr;
  tally* t_ = nullptr;
  std::vector<char> buffer_ = std::vector<char>(256 * 1024);

 public:
  std::string first_error;  ///< the first error or unexpected reply
};

// --- a started server ------------------------------------------------------------

struct child {
  pid_t pid = -1;
  int out = -1;  ///< its stdout
  std::string what;  ///< "urt-kv --mode urt", for messages
};

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
  return "stopped";
}

/// Starts `path --port 0 --mode M args...` into `ch` (set as soon as it
/// runs, so that the caller can stop it whatever happens next) and returns
/// its port.
std::uint16_t start_server(const options& o, const target& t, child& ch) {
  ch.what = "urt-kv --mode " + t.mode;
  std::vector<std::string> words{o.server, "--port", "0", "--mode", t.mode};
  words.insert(words.end(), o.server_args.begin(), o.server_args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (const int c : o.server_cpus) CPU_SET(c, &cpus);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw failure(errno_text("pipe2"));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw failure(errno_text("fork"));
  if (pid == 0) {  // only async-signal-safe calls from here on
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the load generator
    if (::getppid() != parent) ::_exit(127);
    if (!o.server_cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) ::_exit(126);
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    constexpr char msg[] = "urt-loadgen: cannot execute the --server program\n";
    [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(pipefd[1]);
  ch.pid = pid;
  ch.out = pipefd[0];

  // Its first line: "listening on 127.0.0.1:PORT".
  std::string text;
  const time_point deadline = clock_type::now() + 15s;
  static constexpr std::string_view prefix = "listening on 127.0.0.1:";
  for (;;) {
    if (g_interrupted != 0) throw interrupted{};
    if (const std::size_t at = text.find(prefix); at != std::string::npos) {
      const std::size_t nl = text.find('\n', at);
      if (nl != std::string::npos) {
        const std::string digits = text.substr(at + prefix.size(), nl - at - prefix.size());
        const long p = std::strtol(digits.c_str(), nullptr, 10);
        if (p <= 0 || p > 65535) throw failure(ch.what + " printed a bad port: \"" + digits + "\"");
        return static_cast<std::uint16_t>(p);
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left <= 0ms) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(ch.out);
      ch.pid = -1;
      throw failure(ch.what + " printed no \"listening on\" line within 15 s");
    }
    pollfd pfd{.fd = ch.out, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 100)));
    if (ready <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(ch.out, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    int status = 0;  // EOF: it ended before it listened
    ::waitpid(pid, &status, 0);
    ::close(ch.out);
    ch.pid = -1;
    throw failure(ch.what + " " + status_text(status) + " before it printed its port" +
                  (WIFEXITED(status) && WEXITSTATUS(status) == 126 ? " (--server-cpus: sched_setaffinity failed)" : ""));
  }
}

/// SIGTERM, then up to 15 s for it to exit (SIGKILL after that). Empty when
/// it exited 0; else what went wrong.
std::string stop_server(child& ch) {
  if (ch.pid < 0) return {};
  ::kill(ch.pid, SIGTERM);
  int status = 0;
  std::string problem;
  const time_point deadline = clock_type::now() + 15s;
  for (;;) {
    const pid_t r = ::waitpid(ch.pid, &status, WNOHANG);
    if (r == ch.pid) break;
    if (r < 0 && errno != EINTR) {
      problem = ch.what + ": " + errno_text("waitpid");
      break;
    }
    if (clock_type::now() > deadline) {
      ::kill(ch.pid, SIGKILL);
      ::waitpid(ch.pid, &status, 0);
      problem = ch.what + " did not exit within 15 s of SIGTERM (killed)";
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  if (problem.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    problem = ch.what + " " + status_text(status) + " on SIGTERM (expected exit 0)";
  }
  ::close(ch.out);
  ch.pid = -1;
  return problem;
}

// A started server still running? Throws when it is not.
void check_alive(child& ch) {
  if (ch.pid < 0) return;
  int status = 0;
  if (::waitpid(ch.pid, &status, WNOHANG) == ch.pid) {
    ch.pid = -1;
    ::close(ch.out);
    throw failure(ch.what + " " + status_text(status) + " during the run");
  }
}

// --- the run -------------------------------------------------------------------------

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::string join_cpus(const std::vector<int>& cpus) {
  std::string s;
  for (const int c : cpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

void write_file(const std::string& flag, const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw failure(flag + ": cannot write \"" + path + "\"");
}

// Whether `path` can be written: opened for appending (so that an existing
// file is left as it is until the run writes it), and removed again when it
// did not exist before. A usage error naming the flag and the path if not.
void check_writable(const char* flag, const std::string& path) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    throw usage_error(std::string(flag) + ": \"" + path + "\" is a directory");
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw usage_error(std::string(flag) + ": cannot write \"" + path +
                      "\": " + std::strerror(errno));
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

struct runner {
  const options& o;
  unsigned bulk_conns;
  run_result& res;
  // Each point's samples over the rounds run so far, by server name (one
  // tally per point; the point's round_p99 counts its rounds).
  std::map<std::string, std::vector<tally>> pooled;
  unsigned round = 0;  // the round running now, from 0

  // One round of one point: its tally joins the point's pool.
  void run_point(session& s, server_result& sr, std::size_t i) {
    point_result& p = sr.points[i];
    p.offered = res.capacity * p.percent / 100.0;
    phase ph;
    ph.control_interval = ns_of(1.0 / o.control_rate);
    ph.bulk_interval = std::max(ns_of(bulk_conns / p.offered), nanoseconds(1));
    ph.start = clock_type::now() + 2ms;
    ph.measure_from = ph.start + ns_of(o.warmup_s);
    ph.stop = ph.measure_from + ns_of(o.duration_s);
    tally t = s.run(ph);
    // This round alone, for the progress line and the JSON (summarize()
    // sorts the samples in place; the pool sorts them again at the end).
    const latency_summary alone = summarize(t.control_ns);
    p.round_p99.push_back(alone.p99);
    pooled[sr.name][i].add(t);
    std::fprintf(
        stderr,
        "urt-loadgen: %s: %s%g%%: offered %.0f/s, bulk %.0f/s, control p99 %.1f us, %llu errors\n",
        sr.name.c_str(), round_label().c_str(), p.percent, p.offered,
        static_cast<double>(t.bulk_in_window) / o.duration_s, alone.p99,
        static_cast<unsigned long long>(t.control_errors + t.bulk_errors));
  }

  // The figures of every point of `sr` over the rounds it ran.
  void summarize_points(server_result& sr) {
    auto found = pooled.find(sr.name);
    if (found == pooled.end()) return;
    for (std::size_t i = 0; i < sr.points.size(); ++i) {
      point_result& p = sr.points[i];
      if (p.round_p99.empty()) continue;  // no round of it ran
      tally& all = found->second[i];
      const auto rounds = static_cast<double>(p.round_p99.size());
      p.ran = true;
      p.bulk_rate = static_cast<double>(all.bulk_in_window) / (o.duration_s * rounds);
      p.control = summarize(all.control_ns);
      p.bulk = summarize(all.bulk_ns);
      p.lag = summarize(all.lag_ns);
      p.control_sent = all.control_sent;
      p.bulk_sent = all.bulk_sent;
      p.control_errors = all.control_errors;
      p.bulk_errors = all.bulk_errors;
    }
  }

  [[nodiscard]] std::string round_label() const {
    return o.rounds > 1
               ? "round " + std::to_string(round + 1) + "/" + std::to_string(o.rounds) + ": "
               : "";
  }

  double measure_capacity(session& s, server_result& sr) {
    phase ph;
    ph.closed_loop = true;
    ph.start = clock_type::now();
    ph.measure_from = ph.start + ns_of(o.warmup_s);
    ph.stop = ph.measure_from + ns_of(o.capacity_s);
    const tally t = s.run(ph);
    sr.setup_errors += t.bulk_errors;
    return static_cast<double>(t.bulk_in_window) / o.capacity_s;
  }

  // Everything against one server; throws failure or interrupted.
  void run_server(const target& t, server_result& sr, child& ch) {
    std::uint16_t port = t.port;
    if (!t.mode.empty()) port = start_server(o, t, ch);
    sr.address = t.host + ":" + std::to_string(port);
    std::fprintf(stderr, "urt-loadgen: %s: %s on %s\n", sr.name.c_str(),
                 t.mode.empty() ? "running" : ch.what.c_str(), sr.address.c_str());
    session s(o, bulk_conns, t.host, port);
    struct keep_error {  // the session's first error, whatever way we leave
      session& s;
      server_result& sr;
      ~keep_error() {
        if (sr.first_error.empty()) sr.first_error = s.first_error;
      }
    } keep{s, sr};
    s.connect_all();
    sr.setup_errors += s.preload();
    if (round == 0 && !res.capacity_given) {
      sr.capacity = measure_capacity(s, sr);
      std::fprintf(stderr, "urt-loadgen: %s: capacity %.0f %s/s (closed loop)\n", sr.name.c_str(), sr.capacity,
                   res.bulk_label.c_str());
      if (sr.name == res.baseline) {
        if (sr.capacity <= 0) throw failure("the capacity run got no bulk reply in its measured window");
        res.capacity = sr.capacity;
      }
    }
    pooled[sr.name].resize(sr.points.size());
    for (std::size_t i = 0; i < sr.points.size(); ++i) {
      check_alive(ch);
      run_point(s, sr, i);
    }
    check_alive(ch);
  }
};

int run(options& o) {
  const std::vector<target> order = resolve_targets(o);  // the baseline first
  const std::vector<int> allowed = allowed_cpus();
  for (const auto* list : {&o.server_cpus, &o.client_cpus}) {
    for (const int c : *list) {
      if (std::find(allowed.begin(), allowed.end(), c) == allowed.end()) {
        throw usage_error(std::string(list == &o.server_cpus ? "--server-cpus" : "--client-cpus") + ": CPU " +
                          std::to_string(c) + " is not one this process may use (" + join_cpus(allowed) + ")");
      }
    }
  }
  if (!o.server.empty()) {
    struct stat st{};
    if (::stat(o.server.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(o.server.c_str(), X_OK) != 0) {
      throw usage_error("--server: \"" + o.server + "\" is not an executable file");
    }
  }
  // The outputs are written after the run, which may take an hour: a path
  // that cannot be written is an error now, not then.
  for (const auto& [flag, path] :
       {std::pair{"--json", &o.json_path}, std::pair{"--svg", &o.svg_path}}) {
    if (!path->empty()) check_writable(flag, *path);
  }
  unsigned threads = server_threads(o);
  if (threads == 0) {
    threads = static_cast<unsigned>(!o.server_cpus.empty() ? o.server_cpus.size() : std::max<std::size_t>(1, allowed.size()));
  }
  const unsigned bulk_conns = o.bulk_conns != 0 ? o.bulk_conns : 2 * threads;

  if (!o.client_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int c : o.client_cpus) CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) throw failure(errno_text("--client-cpus: sched_setaffinity"));
  }
  if (o.client_priority != 0) {
    // SCHED_RESET_ON_FORK: the servers it starts run at SCHED_OTHER.
    const sched_param sp{.sched_priority = o.client_priority};
    if (::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0) {
      throw failure(errno_text("--client-priority: sched_setscheduler(SCHED_FIFO)"));
    }
  }
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // wake for each send time, not up to 50 us after it

  run_result res;
  res.bulk_label = o.bulk == bulk_command::work ? "WORK " + std::to_string(o.work_us) : "KEYS " + o.keys_pattern;
  res.bulk_conns = bulk_conns;
  res.control_conns = o.control_conns;
  res.control_rate = o.control_rate;
  res.duration_s = o.duration_s;
  res.warmup_s = o.warmup_s;
  res.capacity_s = o.capacity_s;
  res.timeout_s = o.timeout_s;
  res.rounds = o.rounds;
  res.capacity_given = o.capacity.has_value();
  res.capacity = o.capacity.value_or(0);
  res.baseline = o.baseline;
  res.percents = o.points;
  res.client = "one thread on CPUs ";
  res.client += join_cpus(o.client_cpus.empty() ? allowed : o.client_cpus);
  res.client += o.client_cpus.empty() ? " (not pinned)" : " (--client-cpus)";
  if (o.client_priority != 0) {
    res.client += " at SCHED_FIFO ";
    res.client += std::to_string(o.client_priority);
  }
  const std::uint32_t spin = client_spin_us(o);
  res.client_spun = spin == spin_always;
  if (spin == 0) {
    res.client += ", sleeping until each send";
  } else if (spin == spin_always) {
    res.client += ", busy-polling (never sleeping)";
  } else {
    res.client += ", busy-polling within ";
    res.client += std::to_string(spin);
    res.client += " us of a send";
  }
  if (!o.spin_us) res.client += " (--spin-us auto)";
  res.client += "; servers on CPUs ";
  res.client += join_cpus(o.server_cpus.empty() ? allowed : o.server_cpus);
  // Display order: as given (--modes, then --target), the baseline wherever it is.
  std::vector<target> shown;
  if (!o.server.empty()) {
    for (const std::string& m : o.modes) shown.push_back({.name = m, .mode = m, .host = "127.0.0.1", .port = 0});
  }
  shown.insert(shown.end(), o.targets.begin(), o.targets.end());
  for (const target& t : shown) {
    server_result sr;
    sr.name = t.name;
    sr.mode = t.mode;
    sr.points.resize(o.points.size());
    for (std::size_t i = 0; i < o.points.size(); ++i) sr.points[i].percent = o.points[i];
    res.servers.push_back(std::move(sr));
  }
  const auto result_of = [&](const std::string& name) -> server_result& {
    return *std::find_if(res.servers.begin(), res.servers.end(), [&](const server_result& s) { return s.name == name; });
  };

  std::fprintf(stderr, "urt-loadgen: %u bulk connections (%s), %u control connections at %g/s each\n", bulk_conns,
               res.bulk_label.c_str(), o.control_conns, o.control_rate);
  runner r{o, bulk_conns, res, {}, 0};
  // Round by round, the servers in turn (the baseline first: its capacity,
  // measured in the first round, sets everyone's offered rates), so that a
  // drift of the machine over the run falls on every server alike. A server
  // that fails runs no further round; its points keep the rounds they ran.
  bool stop_all = false;
  for (r.round = 0; r.round < o.rounds && !stop_all; ++r.round) {
    for (const target& t : order) {
      server_result& sr = result_of(t.name);
      if (!sr.failure.empty()) continue;
      child ch;
      try {
        r.run_server(t, sr, ch);
      } catch (const failure& f) {
        sr.failure = r.round_label() + f.what();
        std::fprintf(stderr, "urt-loadgen: %s: %s\n", sr.name.c_str(), sr.failure.c_str());
        if (t.name == res.baseline && res.capacity <= 0) stop_all = true;
      } catch (const interrupted&) {
        if (const std::string m = stop_server(ch); !m.empty()) {
          std::fprintf(stderr, "urt-loadgen: %s\n", m.c_str());
        }
        std::fprintf(stderr, "urt-loadgen: interrupted\n");
        return 130;
      }
      if (const std::string m = stop_server(ch); !m.empty()) {
        sr.failure += (sr.failure.empty() ? "" : "; ") + r.round_label() + m;
        std::fprintf(stderr, "urt-loadgen: %s: %s\n", sr.name.c_str(), m.c_str());
      }
      if (g_interrupted != 0) {
        std::fprintf(stderr, "urt-loadgen: interrupted\n");
        return 130;
      }
      if (stop_all) {
        for (server_result& other : res.servers) {
          if (other.failure.empty() && &other != &sr) {
            other.failure = "not run: the baseline " + sr.name + " failed";
          }
        }
        break;
      }
    }
  }
  for (server_result& sr : res.servers) r.summarize_points(sr);

  std::fputs(format_table(res).c_str(), stdout);
  std::fflush(stdout);
  int rc = 0;
  try {
    if (!o.json_path.empty()) write_file("--json", o.json_path, format_json(res));
    if (!o.svg_path.empty()) write_file("--svg", o.svg_path, format_svg(res));
  } catch (const failure& f) {
    std::fprintf(stderr, "urt-loadgen: %s\n", f.what());
    rc = 1;
  }
  for (const server_result& s : res.servers) {
    std::uint64_t errors = s.setup_errors;
    for (const point_result& p : s.points) errors += p.control_errors + p.bulk_errors;
    if (errors != 0) {
      std::fprintf(stderr, "urt-loadgen: error: %s: %llu error or unexpected replies; the first: %s\n", s.name.c_str(),
                   static_cast<unsigned long long>(errors), s.first_error.c_str());
      rc = 1;
    }
    if (!s.failure.empty()) {
      std::fprintf(stderr, "urt-loadgen: error: %s: %s\n", s.name.c_str(), s.failure.c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const usage_error& e) {
    std::fprintf(stderr, "urt-loadgen: %s\n(urt-loadgen --help lists the options)\n", e.what());
    return 2;
  }
  if (o.help) {
    std::fputs(usage_text(), stdout);
    return 0;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  try {
    return run(o);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "urt-loadgen: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "urt-loadgen: error: %s\n", e.what());
    return 1;
  }
}
