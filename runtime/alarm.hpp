// alarm: a worker's absolute timerfd (TFD_TIMER_ABSTIME on CLOCK_MONOTONIC,
// the clock of urt::clock) in its io_context: the parker sets it to the
// nearest deadline before parking and the park ends then. Absolute
// deadlines keep periodic releases drift-free: release k is computed as
// start + k * period and armed as such, never as "now + period".
//
// Concurrency: owner only, except fired(), which anyone may read.
#pragma once

#include <asio/io_context.hpp>

#include <cstdint>

#include "urt/timer.hpp"
#include "wakeup_fd.hpp"

namespace urt::detail {

class alarm {
 public:
  /// Creates the timerfd (throws std::system_error) and binds it to `io`.
  explicit alarm(asio::io_context& io);
  alarm(const alarm&) = delete;
  alarm& operator=(const alarm&) = delete;

  void disarm() { fd_.disarm(); }
  /// Owner, before parking: the next expiry is `at` (absolute). Sets the
  /// timerfd, which also clears its expiry count, and arms the wait when
  /// the last one completed; no system call when it is set there already
  /// and has not fired since. The timerfd is never read.
  void set(clock::time_point at);
  /// Expiries that woke the owner (owner writes, anyone reads).
  [[nodiscard]] std::uint64_t fired() const noexcept { return fd_.completions(); }

 private:
  wakeup_fd fd_;
  clock::time_point armed_ = clock::time_point::max();
};

}  // namespace urt::detail
