#include "wakeup_fd.hpp"

#include <unistd.h>

namespace urt::detail {

void wakeup_fd::arm() {
  fd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const std::error_code& ec) {
    if (!ec) on_readable();
  });
}

void wakeup_fd::disarm() {
  std::error_code ignored;
  fd_.cancel(ignored);
}

void wakeup_fd::on_readable() {
  std::uint64_t value = 0;
  // EAGAIN: a racing wake-up was drained already, or a timerfd was re-set
  // after it fired; nothing to count.
  if (::read(fd_.native_handle(), &value, sizeof value) == sizeof value) {
    total_.store(total_.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
  }
  arm();
}

}  // namespace urt::detail
