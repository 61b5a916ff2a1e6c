// wakeup_fd: an eventfd or timerfd waited on in its owner's io_context.
//
// Both kinds of fd become readable when something happened and yield an
// 8-byte counter when read. A wait armed on the fd completes once per
// wake-up; its handler drains the counter, adds it to a running total and
// re-arms, so the fd keeps its owner's io_context::run_one() wakeable.
// The doorbell (eventfd) and the alarm (timerfd) are built on it.
//
// Concurrency: owner only, except total(), which anyone may read (relaxed).
#pragma once

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <cstdint>

namespace urt::detail {

class wakeup_fd {
 public:
  /// Takes ownership of `fd` (non-blocking) and binds it to `io`.
  wakeup_fd(asio::io_context& io, int fd) : fd_(io, fd) {}
  wakeup_fd(const wakeup_fd&) = delete;
  wakeup_fd& operator=(const wakeup_fd&) = delete;

  /// Owner: arms the wait (see above).
  void arm();
  /// Owner: cancels the wait (before the io_context stops or dies).
  void disarm();
  [[nodiscard]] int native_handle() noexcept { return fd_.native_handle(); }
  /// Sum of the counters read so far: rings, or timer expirations.
  [[nodiscard]] std::uint64_t total() const noexcept {
    return total_.load(std::memory_order_relaxed);
  }

 private:
  void on_readable();

  asio::posix::stream_descriptor fd_;
  std::atomic<std::uint64_t> total_{0};  // owner-written
};

}  // namespace urt::detail
