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
  series.cancel();  // takes effect at a next release that never comes: stop() ends it
  CHECK(rt.stop(urt::stop_mode::cancel) == 1);
  CHECK(runs.load() == 1);
}
