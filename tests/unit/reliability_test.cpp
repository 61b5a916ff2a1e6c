// Regression tests for defects found by adversarial use of the public API
// (extreme values, exhausted resources, out-of-range enums), one section
// per defect. Each test asserts behaviour, never a duration.
#include <doctest/doctest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <typeinfo>
#include <vector>

#include "node_pool.hpp"
#include "urt/runtime.hpp"
#include "urt/worker_set.hpp"

namespace {

using namespace std::chrono_literals;

// One worker on a synthetic topology (no binding), parking at once.
urt::runtime_options one_worker() {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("core:1 pu:1");
  o.idle_spin = 0ns;
  return o;
}

// Waits until `n` reaches at least `want`.
void wait_for(const std::atomic<int>& n, int want) {
  for (int seen = n.load(); seen < want; seen = n.load()) n.wait(seen);
}

}  // namespace

// ------------------------------------------------ every(): saturating releases

TEST_CASE("reliability: every(nanoseconds::max()) runs once and stop(drain) ends the series") {
  urt::runtime rt(one_worker());
  std::atomic<int> runs{0};
  std::atomic<std::int64_t> released{0};
  const urt::clock::time_point start = urt::clock::now();
  urt::periodic_task series =
      rt.every(std::chrono::nanoseconds::max(), urt::task_spec{}, [&] {
        released.store(urt::this_task::release_time().time_since_epoch().count());
        runs.fetch_add(1);
        runs.notify_all();
      }, start);
  wait_for(runs, 1);
  // The second release would be past the clock's range: it never comes.
  // Before the fix the release wrapped into the past and ran at once, again
  // and again; give such a loop time to show.
  std::this_thread::sleep_for(20ms);
  CHECK(runs.load() == 1);
  CHECK(released.load() == start.time_since_epoch().count());
  // The series is still pending (accepted, not finished) until stop().
  CHECK(rt.stats().total().accepted == 1);
  CHECK(rt.stats().total().completed == 0);
  CHECK(rt.stop(urt::stop_mode::drain) == 0);
  CHECK(runs.load() == 1);
  CHECK(rt.stats().total().completed == 1);
}

TEST_CASE("reliability: a series whose next release saturates is dropped by stop(cancel)") {
  urt::runtime rt(one_worker());
  std::atomic<int> runs{0};
  urt::periodic_task series = rt.every(std::chrono::nanoseconds::max(), urt::task_spec{}, [&] {
    runs.fetch_add(1);
    runs.notify_all();
  });
  wait_for(runs, 1);
  // The worker queues the series' next release after the task returns; a
  // cancel() before that ends the series there, as completed (it failed 2
  // runs in 40 that way). A task spawned now runs on the only worker after
  // that, so once it ran the next release is queued.
  std::atomic<int> fenced{0};
  rt.spawn(urt::task_spec{}, [&] {
    fenced.store(1);
    fenced.notify_all();
  });
  wait_for(fenced, 1);
  series.cancel();  // takes effect at a next release that never comes: stop() ends it
  CHECK(rt.stop(urt::stop_mode::cancel) == 1);
  CHECK(runs.load() == 1);
}

// ------------------------------------------------ every(): skip from time_point::min()

namespace {
// Time points as unsigned offsets from time_point::min(): differences of
// any two are exact in std::uint64_t.
std::uint64_t from_min(urt::clock::time_point t) {
  return static_cast<std::uint64_t>(t.time_since_epoch().count()) -
         static_cast<std::uint64_t>(urt::clock::time_point::min().time_since_epoch().count());
}
}  // namespace

TEST_CASE("reliability: a skip series started at time_point::min() counts its missed releases") {
  urt::runtime rt(one_worker());
  constexpr auto period = 1ms;
  constexpr auto period_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds{period}.count());
  std::atomic<int> runs{0};
  std::atomic<std::uint64_t> second_release{0};
  const urt::clock::time_point before = urt::clock::now();
  urt::periodic_task series = rt.every(
      period, urt::task_spec{},
      [&] {
        if (runs.load() == 1) second_release.store(from_min(urt::this_task::release_time()));
        runs.fetch_add(1);
        runs.notify_all();
      },
      urt::clock::time_point::min(), urt::overrun_policy::skip);
  wait_for(runs, 2);
  const std::uint64_t skipped = series.skipped();
  const urt::clock::time_point after = urt::clock::now();
  series.cancel();
  rt.stop();
  // Release 0 ran at min(); the grid points from min() + period up to the
  // one before the second release were skipped: about (now - min) / period,
  // a large but exact count, never a wrapped one. (A later overrun may have
  // skipped a few more by the time it is read.)
  CAPTURE(skipped);
  CHECK(skipped >= (from_min(before) - period_ns) / period_ns);
  CHECK(skipped <= from_min(after) / period_ns);
  // The second release ran on the grid, at or after the time it was
  // computed, as release skipped + 1 when nothing else was skipped since.
  const std::uint64_t second = second_release.load();
  CHECK(second % period_ns == 0);
  CHECK(second >= from_min(before));
  CHECK(second / period_ns <= skipped + 1);
}

// ------------------------------------------------ options: wait lengths up to 1 s

namespace {

// The what() of the exception `fn` throws, which must be exactly of type E.
template <class E, class Fn>
std::string thrown(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    CHECK_MESSAGE(typeid(e) == typeid(E), "threw " << typeid(e).name() << ": " << e.what());
    return e.what();
  }
  FAIL_CHECK("nothing was thrown");
  return {};
}

}  // namespace

TEST_CASE("reliability: ipi_timeout, idle_spin and timer_spin above 1 s are rejected by name") {
  const auto with = [](auto set) {
    urt::runtime_options o = one_worker();
    set(o);
    return thrown<std::invalid_argument>([&] { urt::runtime rt(o); });
  };
  constexpr auto huge = std::chrono::nanoseconds::max();
  CHECK(with([&](auto& o) { o.ipi_timeout = huge; }) ==
        "runtime_options.ipi_timeout: 9223372036854775807ns is above 1000000000ns (1 s)");
  CHECK(with([&](auto& o) { o.idle_spin = huge; }) ==
        "runtime_options.idle_spin: 9223372036854775807ns is above 1000000000ns (1 s)");
  CHECK(with([&](auto& o) { o.timer_spin = huge; }) ==
        "runtime_options.timer_spin: 9223372036854775807ns is above 1000000000ns (1 s)");
  CHECK(with([&](auto& o) { o.ipi_timeout = 1s + 1ns; }) ==
        "runtime_options.ipi_timeout: 1000000001ns is above 1000000000ns (1 s)");
  CHECK(urt::runtime_options::max_wait == 1s);

  // The limit itself is accepted, and a runtime runs with it.
  urt::runtime_options o = one_worker();
  o.ipi_timeout = urt::runtime_options::max_wait;
  o.idle_spin = urt::runtime_options::max_wait;
  o.timer_spin = urt::runtime_options::max_wait;
  CHECK_NOTHROW(o.validate());
  urt::runtime rt(o);
  std::atomic<int> runs{0};
  rt.spawn_at(urt::clock::now() + 1ms, urt::task_spec{}, [&] {
    runs.fetch_add(1);
    runs.notify_all();
  });
  wait_for(runs, 1);
  CHECK(rt.stop() == 0);
}

// ------------------------------------------------ parse_cpulist at UINT_MAX

TEST_CASE("reliability: parse_cpulist ranges ending at UINT_MAX end") {
  constexpr unsigned top = UINT_MAX;
  CHECK(urt::parse_cpulist("4294967295", "f", top) == std::vector<unsigned>{top});
  CHECK(urt::parse_cpulist("4294967293-4294967295", "f", top) ==
        std::vector<unsigned>{top - 2, top - 1, top});
  CHECK(urt::parse_cpulist("4294967295,0-1,4294967295-4294967295", "f", top) ==
        std::vector<unsigned>{0, 1, top});
}

TEST_CASE("reliability: parse_cpulist holds each index once while it parses repeated ranges") {
  // 100 copies of the widest range the default limit allows: 1.1 KB of
  // text. Expanded range by range before duplicates were dropped, it took
  // 100 million indexes (400 MB), and the returned vector kept that
  // capacity; a few KB of text could exhaust memory.
  std::string text;
  for (int i = 0; i < 100; ++i) {
    if (i != 0) text += ',';
    text += "0-1048575";
  }
  const std::vector<unsigned> ids = urt::parse_cpulist(text, "f");
  REQUIRE(ids.size() == 1048576);
  CHECK(ids.front() == 0);
  CHECK(ids.back() == 1048575);
  CHECK(ids.capacity() <= 2 * ids.size());
  // Overlapping, nested and adjacent ranges in any order merge exactly.
  CHECK(urt::parse_cpulist("5-9,0-2,3,1-6,20-21,8-12,22", "f") ==
        std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 22});
  CHECK(urt::parse_cpulist("4294967295,4294967294-4294967295,0", "f", UINT_MAX) ==
        std::vector<unsigned>{0, 4294967294u, 4294967295u});
}

// ------------------------------------------------ construction at the open-file limit

namespace {

// Open file descriptors of this process (the directory's own excluded).
int open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;
}

// In a child process: for each soft RLIMIT_NOFILE from the lowest free fd
// + 1 up, construct runtimes that fail for want of fds and check that every
// fd they opened was closed. Exit status: 0 ok, 1 a leak, 2 no
// construction ever failed (the test would prove nothing), 3 setup failed.
[[noreturn]] void fd_limit_child() {
  rlimit original{};
  if (::getrlimit(RLIMIT_NOFILE, &original) != 0) ::_exit(3);
  const int lowest_free = ::dup(0);
  if (lowest_free < 0) ::_exit(3);
  ::close(lowest_free);
  {
    urt::runtime warm(one_worker());  // one-time initialisation, outside the counts
  }
  {
    // UBSan checks the dynamic type in std::system_error's constructor (Asio
    // throws one on failure); its first check of a type probes memory
    // through a pipe, which fails at the fd limit and is misreported as an
    // invalid vptr. Checked once here, the result is cached.
    const std::system_error warm(std::make_error_code(std::errc::too_many_files_open), "warm");
  }
  bool failed_once = false;
  for (int extra = 1; extra <= 12; ++extra) {
    const int before = open_fds();
    rlimit low = original;
    low.rlim_cur = static_cast<rlim_t>(lowest_free + extra);
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(3);
    int failures = 0;
    for (int i = 0; i < 10; ++i) {
      try {
        urt::runtime rt(one_worker());
      } catch (const std::exception&) {
        ++failures;
      }
    }
    if (::setrlimit(RLIMIT_NOFILE, &original) != 0) ::_exit(3);
    const int after = open_fds();
    std::fprintf(stderr, "limit lowest free fd + %d: %d of 10 constructions failed, fds %d -> %d\n",
                 extra, failures, before, after);
    if (after != before) ::_exit(1);
    failed_once = failed_once || failures > 0;
  }
  ::_exit(failed_once ? 0 : 2);
}

}  // namespace

TEST_CASE("reliability: a runtime that fails at the open-file limit closes every fd it opened") {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) fd_limit_child();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK_MESSAGE(WEXITSTATUS(status) != 1, "failed constructions left fds open (see stderr)");
  CHECK_MESSAGE(WEXITSTATUS(status) != 2, "no construction failed at any limit");
  CHECK(WEXITSTATUS(status) == 0);
}

// ------------------------------------------------ node pool growth

TEST_CASE("reliability: the node pool grows to many chunks and takes every node back") {
  // A chunk at a time, each committed in the depot's one address range:
  // 512 chunks (10 MiB) of distinct nodes, all free in the depot again
  // once released (but for what this thread's magazine keeps).
  namespace pool = urt::detail::node_pool;
  constexpr std::size_t chunks = 512;
  std::vector<urt::detail::task_node*> live;
  live.reserve(chunks * pool::pool_batch);
  for (std::size_t i = 0; i < chunks * pool::pool_batch; ++i) live.push_back(pool::allocate());
  const pool::depot_shape grown = pool::shape();
  CHECK(grown.chunks >= chunks);
  CHECK(grown.heap_nodes == 0);
  CHECK(std::set<urt::detail::task_node*>(live.begin(), live.end()).size() == live.size());
  // Every node writable, start to end (a commit that missed a page faults).
  for (urt::detail::task_node* n : live) n->priority = 7;
  for (urt::detail::task_node* n : live) REQUIRE(n->priority == 7);
  for (urt::detail::task_node* n : live) n->priority = urt::priority_normal;
  for (urt::detail::task_node* n : live) pool::release(n);
  const pool::depot_shape after = pool::shape();
  CHECK(after.chunks == grown.chunks);
  CHECK(after.free_nodes + 2 * pool::pool_batch >= after.chunks * pool::pool_batch);
  CHECK(after.free_nodes <= after.chunks * pool::pool_batch);
}

// ------------------------------------------------ stop(): unknown modes

TEST_CASE("reliability: stop() rejects a value that is not a stop_mode, before stopping anything") {
  urt::runtime rt(one_worker());
  CHECK(thrown<std::invalid_argument>([&] { rt.stop(static_cast<urt::stop_mode>(9)); }) ==
        "runtime::stop: mode 9 is not a stop_mode");
  // Still running: a spawn is accepted and runs.
  std::atomic<int> runs{0};
  rt.spawn(urt::task_spec{}, [&] {
    runs.fetch_add(1);
    runs.notify_all();
  });
  wait_for(runs, 1);
  CHECK(rt.stop(urt::stop_mode::cancel) == 0);
  CHECK(runs.load() == 1);
}

// ------------------------------------------------ oversized topology sources

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

urt::topology synthetic(const std::string& description) {
  const urt::topology_options options{.source = urt::topology_source::synthetic(description)};
  return urt::topology(options);
}

// A file under the temp directory, removed when the scope ends.
struct temp_path {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("urt_reliability_" + std::to_string(::getpid()) + ".xml");
  temp_path() = default;
  temp_path(const temp_path&) = delete;
  temp_path& operator=(const temp_path&) = delete;
  ~temp_path() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("reliability: a synthetic topology of over urt::max_workers PUs is rejected unloaded") {
  // Sized from the description (the product of its arities), so even a
  // huge one is rejected at once instead of after hwloc built it.
  for (const auto& [text, count] : std::vector<std::pair<std::string, std::string>>{
           {"pu:1025", "1025"},
           {"pu:16384", "16384"},
           {"pack:4 core:16 pu:17", "1088"},
           {"pack:2 [numa(memory=1GB)] l3:8(size=32MB) core:64 pu:2", "2048"},
           {"pu:0x401", "1025"},
           {"4 16 17", "1088"},
           {"pack:65536 core:65536 pu:65536", "281474976710656"},
       }) {
    CAPTURE(text);
    const std::string message = thrown<std::invalid_argument>([&] { synthetic(text); });
    CHECK(message == "topology.synthetic: \"" + text + "\" has " + count +
                         " PUs, more than urt::max_workers (1024)");
    urt::runtime_options o = one_worker();
    o.topology = urt::topology_source::synthetic(text);
    const std::string from_runtime = thrown<std::invalid_argument>([&] { urt::runtime rt(o); });
    CHECK(contains(from_runtime, "runtime_options.topology"));
    CHECK(contains(from_runtime, count + " PUs"));
    CHECK_FALSE(contains(from_runtime, "runtime_options.cpus"));
  }
  // Up to the limit they load as before, attributes and attached NUMA nodes included.
  CHECK(synthetic("pack:2 [numa(memory=1GB)] l3:8(size=32MB) core:8 pu:2").worker_count() == 256);
  CHECK(synthetic("pack:4 core:16 pu:16").worker_count() == 1024);
  CHECK(synthetic("2 4").worker_count() == 8);
  CHECK(contains(thrown<std::invalid_argument>([] { synthetic("pu:many"); }), "cannot parse"));
}

TEST_CASE("reliability: an XML topology source must be a regular file of at most max_xml_bytes") {
  CHECK(urt::topology::max_xml_bytes == 16u * 1024 * 1024);
  const auto xml = [](const std::string& path) {
    return thrown<std::invalid_argument>(
        [&] { urt::topology t(urt::topology_options{.source = urt::topology_source::xml(path)}); });
  };
  CHECK(xml("/dev/zero") == "topology.xml: \"/dev/zero\" is not a regular file");
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK(xml(dir) == "topology.xml: \"" + dir + "\" is not a regular file");
  temp_path big;
  {
    // Sparse: no disk space, but one byte above the limit.
    const int fd = ::open(big.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(urt::topology::max_xml_bytes + 1)) == 0);
    ::close(fd);
  }
  CHECK(xml(big.path.string()) == "topology.xml: \"" + big.path.string() + "\" has " +
                                      std::to_string(urt::topology::max_xml_bytes + 1) +
                                      " bytes, more than 16777216 (16 MiB)");
  // A file within the limit still loads, through the runtime too.
  {
    const urt::topology t = synthetic("pack:2 core:2 pu:2");
    t.save_xml(big.path.string());
  }
  urt::runtime_options o = one_worker();
  o.topology = urt::topology_source::xml(big.path.string());
  urt::runtime rt(o);
  CHECK(rt.worker_count() == 8);
  CHECK(rt.stop() == 0);
}
