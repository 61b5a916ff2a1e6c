#include "alarm.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <system_error>

namespace urt::detail {

namespace {
int make_timerfd() {
  // CLOCK_MONOTONIC is what std::chrono::steady_clock reads on Linux.
  const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "alarm: timerfd_create");
  return fd;
}
}  // namespace

alarm::alarm(asio::io_context& io) : fd_(io, make_timerfd()) {}

void alarm::set(clock::time_point at) {
  // A timerfd is one-shot: once it fired (its wait completed) it must be
  // set again.
  if (at == armed_ && fd_.waiting()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  itimerspec spec{};
  // A deadline at or before the epoch would disarm the timer: use 1 ns.
  const long long when = ns > 0 ? ns : 1;
  spec.it_value.tv_sec = static_cast<time_t>(when / 1000000000);
  spec.it_value.tv_nsec = static_cast<long>(when % 1000000000);
  // Cannot fail with a valid fd and a normalized absolute time.
  if (::timerfd_settime(fd_.native_handle(), TFD_TIMER_ABSTIME, &spec, nullptr) == 0) {
    armed_ = at;
  }
  fd_.arm();  // after the set: a wait on a fired, unset timerfd completes at once
}

}  // namespace urt::detail
