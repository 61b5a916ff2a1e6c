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

void doorbell::write_eventfd() noexcept {
  const std::uint64_t one = 1;
  // Cannot fail short of a closed fd: the counter would need 2^64 - 2 rings.
  [[maybe_unused]] const auto n = ::write(fd_.native_handle(), &one, sizeof one);
}

}  // namespace urt::detail
