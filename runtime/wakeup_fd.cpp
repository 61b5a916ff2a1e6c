#include "wakeup_fd.hpp"

#include <unistd.h>

namespace urt::detail {

wakeup_fd::wakeup_fd(asio::io_context& io, int fd) try : fd_(io, fd) {
} catch (...) {
  // The descriptor did not take `fd`: the io_context's first descriptor
  // creates its reactor (an epoll fd and an eventfd), which fails at the
  // open-file limit, or registering `fd` failed. Nobody else owns it.
  ::close(fd);
}  // rethrows

void wakeup_fd::arm() {
  if (waiting_) return;
  waiting_ = true;
  fd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const std::error_code& ec) {
    // Completed or cancelled: either way no wait is pending any more. No
    // system call here: this runs on the wake-up path (see the header).
    waiting_ = false;
    if (!ec) {
      completions_.store(completions_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    }
  });
}

void wakeup_fd::disarm() {
  std::error_code ignored;
  fd_.cancel(ignored);
}

std::uint64_t wakeup_fd::drain() noexcept {
  std::uint64_t value = 0;
  // EAGAIN: nothing to read (a racing ring was drained already).
  if (::read(fd_.native_handle(), &value, sizeof value) != sizeof value) return 0;
  return value;
}

}  // namespace urt::detail
