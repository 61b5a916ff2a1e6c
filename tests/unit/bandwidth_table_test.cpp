// Tests of the live bandwidth parameters (runtime/bandwidth_table.*): readers
// registered with QSBR, as workers are, never see a torn or freed block
// while a writer publishes thousands of new ones, and every retired block is
// freed (AddressSanitizer's leak check and ThreadSanitizer run this too).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth_table.hpp"
#include "qsbr.hpp"

using urt::bandwidth_options;
using urt::throttle_mode;
using urt::detail::bandwidth_table;
using namespace std::chrono_literals;

namespace {

// Version v carries runtime v us and period 2v us: a torn block would break
// the relation.
bandwidth_options options_of(std::uint64_t v) {
  return {.mode = v % 2 == 0 ? throttle_mode::deferred : throttle_mode::strict,
          .runtime = std::chrono::microseconds{v},
          .period = std::chrono::microseconds{2 * v + 2}};
}

}  // namespace

TEST_CASE("bandwidth_table: readers never see a torn block while a writer publishes") {
  constexpr std::uint64_t versions = 5000;
  bandwidth_table table(options_of(0));
  std::atomic<int> started{0};
  std::atomic<int> torn{0};
  std::atomic<std::uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      urt::detail::qsbr::register_thread();
      std::uint64_t last = 0;
      std::uint64_t n = 0;
      // Until it has seen the writer's last block (which stays current).
      while (last != versions) {
        const bandwidth_table::block* b = table.read();
        const std::uint64_t v = b->version;
        const bandwidth_options& o = b->runtime_wide;
        if (o.runtime != std::chrono::microseconds{v} ||
            o.period != std::chrono::microseconds{2 * v + 2} ||
            o.mode != (v % 2 == 0 ? throttle_mode::deferred : throttle_mode::strict) || v < last) {
          torn.fetch_add(1);
        }
        last = v;
        if (++n == 1) started.fetch_add(1);
        // A scheduling point: the block may be freed after this.
        urt::detail::qsbr::quiescent();
        if (n % 64 == 0) {
          urt::detail::qsbr::offline();  // as a parking worker
          std::this_thread::yield();
          urt::detail::qsbr::online();
        }
      }
      reads.fetch_add(n);
      urt::detail::qsbr::unregister_thread();
    });
  }
  while (started.load() != 3) std::this_thread::yield();  // every reader is reading
  for (std::uint64_t v = 1; v <= versions; ++v) {
    table.update([v](bandwidth_table::block& b) { b.runtime_wide = options_of(v); });
  }
  CHECK(table.read()->version == versions);
  for (auto& t : readers) t.join();
  CHECK(torn.load() == 0);
  CHECK(reads.load() > 0);
}

TEST_CASE("bandwidth_table: bad parameters are named with the caller's prefix") {
  const auto message = [](bandwidth_options b) -> std::string {
    try {
      urt::detail::validate_bandwidth(b, "runtime::set_bandwidth: bandwidth");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "<accepted>";
  };
  CHECK(message({.mode = throttle_mode::strict, .runtime = 3ms, .period = 2ms}) ==
        "runtime::set_bandwidth: bandwidth.runtime: 3000000ns exceeds the period of 2000000ns");
  CHECK(message({.mode = throttle_mode::off, .runtime = 1ms, .period = 2ms}) == "<accepted>");
}
