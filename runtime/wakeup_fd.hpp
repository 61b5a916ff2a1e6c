// wakeup_fd: an eventfd or timerfd waited on in its owner's io_context.
//
// Both kinds of fd become readable when something happened. A wait armed
// on the fd completes once per wake-up and ends the owner's
// io_context::run_one(). Its handler makes no system call: it only notes
// that the wait completed, so a wake-up goes straight from epoll_wait to
// the worker's scheduling step (the release path of a timed task, the
// wake path of a spawn). The owner re-arms before it parks again, off that
// path: the doorbell drains its eventfd counter first (else the re-armed
// wait would complete at once), the alarm re-sets its timerfd, which
// clears the expiry count (timerfd_settime), so it never reads it.
//
// Concurrency: owner only, except completions(), which anyone may read
// (relaxed).
#pragma once

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <cstdint>

namespace urt::detail {

class wakeup_fd {
 public:
  /// Takes ownership of `fd` (non-blocking) and binds it to `io`. Throws
  /// std::system_error when `io` cannot wait on it (its reactor cannot be
  /// set up, e.g. at the open-file limit); `fd` is closed then too.
  wakeup_fd(asio::io_context& io, int fd);
  wakeup_fd(const wakeup_fd&) = delete;
  wakeup_fd& operator=(const wakeup_fd&) = delete;

  /// Owner: arms a wait unless one is pending. (Asio re-registers the fd
  /// with epoll_ctl for each wait: one system call.)
  void arm();
  /// Owner: cancels the pending wait (before the io_context stops or dies).
  void disarm();
  /// Owner: whether a wait is armed and has not completed yet.
  [[nodiscard]] bool waiting() const noexcept { return waiting_; }
  /// Owner: reads and so resets the fd's counter; returns it (0 when there
  /// was nothing to read). One system call.
  std::uint64_t drain() noexcept;
  [[nodiscard]] int native_handle() noexcept { return fd_.native_handle(); }
  /// Waits that completed (wake-ups seen), owner-written.
  [[nodiscard]] std::uint64_t completions() const noexcept {
    return completions_.load(std::memory_order_relaxed);
  }

 private:
  asio::posix::stream_descriptor fd_;
  bool waiting_ = false;
  std::atomic<std::uint64_t> completions_{0};  // owner-written
};

}  // namespace urt::detail
