// urt-io-poll-bench: what runtime_options::io_poll_interval costs a busy
// worker and what it buys a socket completion that arrives while the worker
// is busy: the measurement its default is chosen by.
//
// A busy worker with I/O outstanding polls its reactor (one epoll_wait with
// a zero timeout) at a scheduling point once io_poll_interval has passed
// since its last poll (runtime/io_poller.hpp). A longer interval makes fewer
// polls; a completion that arrives meanwhile waits longer for its handler.
//
// With the ready ring (runtime_options::io_ready_ring, runtime/ready_ring.hpp)
// a worker polls only when its reactor had an event, or 8 intervals after
// its last poll; without it, every poll is a system call. Each interval (0,
// 2, 5, 10, 20 and 50 us) gets its own runtime with one worker, on CPU 0,
// once without the ring and once with it; the main thread, the client, is
// pinned to CPU 1. Three rounds take the runtimes in turn, so that a slow
// stretch of the machine hits all of them; the figures are medians over
// the rounds.
//   (a) cost: a chain of 200,000 empty tasks at priority 1, each spawned by
//       the one before it (local spawns: no other thread takes part), first
//       with no socket (the reference), then with a socket read pending on
//       the worker (I/O outstanding). ns per task each way (median of 5
//       chains) and the difference, and the worker's polls per task. The
//       difference is a check at every scheduling point (a clock read:
//       has the interval passed?) plus the polls: without the ring, the
//       longest interval, where polls are rare, gives the check, and
//       interval 0 then gives the cost of a poll.
//   (b) what it buys: the worker kept busy by the same chain of 1-us tasks
//       at priority 1; the client writes one byte to a socket whose read is
//       pending on the worker at priority 90, after a random pause of 50 to
//       150 us, 2000 times. The time from just before the write to the start
//       of the read's handler (a task at 90): p50 / p99 / max; and the chain's
//       tasks run per second meanwhile (what the polls leave the bulk work).
// Needs CPUs 0 and 1. No options.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "urt/executor.hpp"
#include "urt/urt.hpp"

namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t chain_tasks = 200'000;
constexpr int chain_repeats = 5;
constexpr int rounds = 3;
constexpr int samples = 2000;
constexpr urt::priority_t bulk_priority = 1;
constexpr urt::priority_t io_priority = 90;
const std::vector<microseconds> intervals = {microseconds{0},  microseconds{2},  microseconds{5},
                                             microseconds{10}, microseconds{20}, microseconds{50}};

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<nanoseconds>(clock_type::now().time_since_epoch()).count();
}

void spin_for(nanoseconds d) noexcept {
  const std::int64_t end = now_ns() + d.count();
  while (now_ns() < end) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p / 100 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// Binds the calling thread to CPUs first..last.
void pin_to_cpus(int first, int last) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = first; c <= last; ++c) CPU_SET(c, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    throw std::runtime_error("cannot bind the client thread to CPUs " + std::to_string(first) +
                             "-" + std::to_string(last));
  }
}

/// A chain of tasks at bulk_priority on the runtime's one worker: each runs
/// `work`, then spawns the next from inside itself, until `limit` ran or
/// stop() was called.
class chain {
 public:
  chain(urt::runtime& rt, nanoseconds work, std::uint64_t limit)
      : rt_(rt), work_(work), limit_(limit) {}
  chain(const chain&) = delete;
  chain& operator=(const chain&) = delete;

  void start() {
    rt_.spawn({.priority = bulk_priority}, [this] { step(); });
  }
  void stop() noexcept { go_.store(false, std::memory_order_relaxed); }
  /// Blocks until the last task of the chain has run.
  void wait() {
    // Acquire: pairs with the release store of the last task.
    while (!ended_.load(std::memory_order_acquire)) ended_.wait(false, std::memory_order_acquire);
  }
  [[nodiscard]] std::uint64_t ran() const noexcept {
    return ran_.load(std::memory_order_relaxed);
  }

 private:
  void step() {
    if (work_.count() > 0) spin_for(work_);
    const std::uint64_t n = ran_.load(std::memory_order_relaxed) + 1;  // one writer: the worker
    ran_.store(n, std::memory_order_relaxed);
    if (n < limit_ && go_.load(std::memory_order_relaxed)) {
      rt_.spawn({.priority = bulk_priority}, [this] { step(); });
      return;
    }
    // Release: pairs with the acquire load in wait().
    ended_.store(true, std::memory_order_release);
    ended_.notify_all();
  }

  urt::runtime& rt_;
  const nanoseconds work_;
  const std::uint64_t limit_;
  std::atomic<bool> go_{true};
  std::atomic<std::uint64_t> ran_{0};
  std::atomic<bool> ended_{false};
};

/// A loopback TCP connection whose server end lives on the runtime's worker
/// (its completions run as tasks at io_priority) with a read always pending;
/// the client end is a plain blocking socket for the main thread.
class pending_read {
 public:
  explicit pending_read(urt::runtime& rt)
      : acceptor_(rt.executor({.priority = io_priority}),
                  asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        client_(client_io_) {
    client_.connect(acceptor_.local_endpoint());
    client_.set_option(asio::ip::tcp::no_delay(true));
    server_ = std::make_unique<urt::net::tcp_socket>(acceptor_.accept());
    server_->set_option(asio::ip::tcp::no_delay(true));
    arm();
  }
  pending_read(const pending_read&) = delete;
  pending_read& operator=(const pending_read&) = delete;
  ~pending_read() {
    std::error_code ignored;
    server_->close(ignored);  // the pending read completes as aborted
  }

  /// Writes one byte and waits for the read's handler to start; ns from
  /// just before the write to that start.
  double sample() {
    started_.store(0, std::memory_order_relaxed);
    const std::int64_t t0 = now_ns();
    const char byte = 'x';
    asio::write(client_, asio::buffer(&byte, 1));
    const std::int64_t give_up = t0 + 1'000'000'000;
    std::int64_t t1 = 0;
    // Acquire: pairs with the handler's release store.
    while ((t1 = started_.load(std::memory_order_acquire)) == 0) {
      if (now_ns() > give_up) throw std::runtime_error("a read's handler did not start within 1 s");
    }
    return static_cast<double>(t1 - t0);
  }

 private:
  void arm() {
    server_->async_read_some(asio::buffer(buf_), [this](const std::error_code& ec, std::size_t) {
      if (ec) return;  // closed
      // Release: pairs with the acquire load in sample().
      started_.store(now_ns(), std::memory_order_release);
      arm();
    });
  }

  asio::io_context client_io_;
  urt::net::tcp_acceptor acceptor_;
  asio::ip::tcp::socket client_;
  std::unique_ptr<urt::net::tcp_socket> server_;
  char buf_[64]{};
  std::atomic<std::int64_t> started_{0};
};

urt::runtime_options options(microseconds interval, bool ring) {
  urt::runtime_options o;
  o.cpus = "0";
  o.io_poll_interval = interval;
  o.io_ready_ring = ring;
  return o;
}

/// ns per task of one chain of chain_tasks empty tasks.
double chain_ns(urt::runtime& rt) {
  chain c(rt, nanoseconds{0}, chain_tasks);
  const auto t0 = clock_type::now();
  c.start();
  c.wait();
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() /
         static_cast<double>(chain_tasks);
}

double median_chain_ns(urt::runtime& rt) {
  std::vector<double> v;
  for (int i = 0; i < chain_repeats; ++i) v.push_back(chain_ns(rt));
  return median(v);
}

struct figures {
  std::vector<double> bare_ns;       // (a) per task, no socket
  std::vector<double> io_ns;         // (a) per task, a read pending
  std::vector<double> polls;         // (a) polls per task
  std::vector<double> latency_us;    // (b) every sample of every round
  std::vector<double> bulk_per_s;    // (b) per round
  std::uint64_t ring_skips = 0;      // polls the ready ring saved, all rounds
};

void one_round(microseconds interval, bool ring, figures& f, std::mt19937& rng) {
  // The runtime takes its CPUs from the creating thread's allowed set; the
  // client then keeps to CPU 1.
  pin_to_cpus(0, 1);
  urt::runtime rt(options(interval, ring));
  pin_to_cpus(1, 1);
  f.bare_ns.push_back(median_chain_ns(rt));
  pending_read reader(rt);
  const std::uint64_t polls0 = rt.stats().total().io_polls;
  std::vector<double> per_task;
  for (int i = 0; i < chain_repeats; ++i) per_task.push_back(chain_ns(rt));
  f.io_ns.push_back(median(per_task));
  f.polls.push_back(static_cast<double>(rt.stats().total().io_polls - polls0) /
                    static_cast<double>(chain_tasks * chain_repeats));

  // (b): the worker busy with 1-us tasks while the samples arrive.
  chain bulk(rt, microseconds{1}, ~std::uint64_t{0});
  bulk.start();
  std::uniform_int_distribution<int> pause_us(50, 150);
  const std::uint64_t ran0 = bulk.ran();
  const auto t0 = clock_type::now();
  for (int i = 0; i < samples; ++i) {
    const auto until = clock_type::now() + microseconds{pause_us(rng)};
    while (clock_type::now() < until) {
    }
    f.latency_us.push_back(reader.sample() / 1e3);
  }
  const double window = std::chrono::duration<double>(clock_type::now() - t0).count();
  f.bulk_per_s.push_back(static_cast<double>(bulk.ran() - ran0) / window);
  bulk.stop();
  bulk.wait();
  f.ring_skips += rt.stats().total().io_ring_skips;
}

void print_table(const char* title, const std::vector<figures>& by_interval) {
  std::printf("%s\n", title);
  std::printf("%10s %9s %9s %9s %10s   %8s %8s %8s %10s\n", "interval", "bare ns", "io ns",
              "extra ns", "polls/task", "p50 us", "p99 us", "max us", "bulk/s");
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    const figures& f = by_interval[i];
    const double bare = median(f.bare_ns);
    const double io = median(f.io_ns);
    std::printf("%7lld us %9.1f %9.1f %9.1f %10.3f   %8.1f %8.1f %8.1f %10.0f\n",
                static_cast<long long>(intervals[i].count()), bare, io, io - bare, median(f.polls),
                percentile(f.latency_us, 50), percentile(f.latency_us, 99),
                percentile(f.latency_us, 100), median(f.bulk_per_s));
  }
}

}  // namespace

int main() {
  try {
    if (std::thread::hardware_concurrency() < 2) {
      std::fprintf(stderr, "urt-io-poll-bench: needs CPUs 0 and 1\n");
      return 1;
    }
    std::mt19937 rng(12345);
    std::vector<figures> by_interval(intervals.size());       // every poll a system call
    std::vector<figures> by_interval_ring(intervals.size());  // with the ready ring
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t i = 0; i < intervals.size(); ++i) {
        one_round(intervals[i], false, by_interval[i], rng);
        one_round(intervals[i], true, by_interval_ring[i], rng);
      }
    }
    std::printf(
        "urt-io-poll-bench: one worker on CPU 0, the client on CPU 1; medians of %d rounds\n",
        rounds);
    std::printf("(a) a chain of %llu empty tasks at priority %d, ns per task: no socket / a read "
                "pending, and the difference; the worker's polls per task\n",
                static_cast<unsigned long long>(chain_tasks), bulk_priority);
    std::printf("(b) the worker busy with 1-us tasks; a byte written to a socket read pending at "
                "priority %d: us to its handler's start, p50 / p99 / max of %d; bulk tasks/s\n",
                io_priority, rounds * samples);
    print_table("without the ready ring (io_ready_ring = false): every poll a system call",
                by_interval);
    std::uint64_t skips = 0;
    for (const figures& f : by_interval_ring) skips += f.ring_skips;
    print_table(skips > 0 ? "with the ready ring (io_ready_ring = true): a poll when the reactor "
                            "had an event, or 8 intervals after the last"
                          : "with io_ready_ring = true, but no poll was skipped: the kernel "
                            "refused io_uring here, every poll a system call",
                by_interval_ring);
    std::vector<double> extra(intervals.size());
    std::vector<double> polls(intervals.size());
    for (std::size_t i = 0; i < intervals.size(); ++i) {
      extra[i] = median(by_interval[i].io_ns) - median(by_interval[i].bare_ns);
      polls[i] = median(by_interval[i].polls);
    }
    // extra = check + polls/task * poll: the longest interval, where polls
    // are rare, gives the check (the clock read that decides whether to
    // poll); interval 0, a poll at every point, the poll.
    const std::size_t last = intervals.size() - 1;
    const double check = extra[last];
    const double poll = polls[0] > polls[last] ? (extra[0] - check) / (polls[0] - polls[last]) : 0;
    std::printf(
        "without the ring, with I/O outstanding, a scheduling point costs about %.0f ns to "
        "decide (the extra at %lld us) and a poll about %.0f ns (the rest of the extra at "
        "0 us, per poll)\n",
        check, static_cast<long long>(intervals[last].count()), poll);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "urt-io-poll-bench: %s\n", e.what());
    return 1;
  }
}
