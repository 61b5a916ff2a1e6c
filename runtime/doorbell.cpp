#include "doorbell.hpp"

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "hot.hpp"

namespace urt::detail {
namespace {
int make_eventfd() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "doorbell: eventfd");
  return fd;
}
}  // namespace

doorbell::doorbell(asio::io_context& io) : fd_(io, make_eventfd()) {}

URT_HOT bool doorbell::wait(clock::time_point until) noexcept {
  constexpr auto futex_word = static_cast<std::uint32_t>(channel::futex);
  // An absolute CLOCK_MONOTONIC deadline (urt::clock's clock):
  // FUTEX_WAIT_BITSET takes one, FUTEX_WAIT only a relative timeout.
  timespec at{};
  const timespec* deadline = nullptr;
  if (until != clock::time_point::max()) {
    const auto ns = std::max<clock::rep>(until.time_since_epoch().count(), 0);
    at.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    at.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    deadline = &at;
  }
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                std::atomic<std::uint32_t>::is_always_lock_free);
  auto* addr = reinterpret_cast<std::uint32_t*>(&word_);
  for (;;) {
    // Acquire: pairs with the release of ring()'s compare-exchange; the
    // owner then sees what the ringer published before it rang.
    if (word_.load(std::memory_order_acquire) != futex_word) break;
    const long r = ::syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, futex_word, deadline,
                             nullptr, FUTEX_BITSET_MATCH_ANY);
    if (r == -1 && errno == ETIMEDOUT) {
      if (word_.load(std::memory_order_acquire) != futex_word) break;  // rung meanwhile
      return false;
    }
    // Woken, EAGAIN (the word changed before the wait) or EINTR: look.
  }
  futex_wakes_.store(futex_wakes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return true;
}

URT_HOT void doorbell::wake_futex() noexcept {
  // Cannot fail for a valid private word; it is a no-op with no waiter
  // (the owner between its announcement and its wait sees the word).
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
}

void doorbell::write_eventfd() noexcept {
  const std::uint64_t one = 1;
  // Cannot fail short of a closed fd: the counter would need 2^64 - 2 rings.
  [[maybe_unused]] const auto n = ::write(fd_.native_handle(), &one, sizeof one);
}

}  // namespace urt::detail
