#include "doorbell.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace urt::detail {
namespace {
int make_eventfd() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "doorbell: eventfd");
  return fd;
}
}  // namespace

doorbell::doorbell(asio::io_context& io) : fd_(io, make_eventfd()) {}

void doorbell::arm() {
  fd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const std::error_code& ec) {
    if (!ec) on_ring();
  });
}

void doorbell::disarm() {
  std::error_code ignored;
  fd_.cancel(ignored);
}

void doorbell::on_ring() {
  std::uint64_t value = 0;
  // EAGAIN means a racing ring was already drained: nothing to count.
  if (::read(fd_.native_handle(), &value, sizeof value) == sizeof value) {
    received_.store(received_.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
  }
  arm();
}

void doorbell::write_eventfd() noexcept {
  const std::uint64_t one = 1;
  // Cannot fail short of a closed fd: the counter would need 2^64 - 2 rings.
  [[maybe_unused]] const auto n = ::write(fd_.native_handle(), &one, sizeof one);
}

}  // namespace urt::detail
