#include "io_poller.hpp"

#include <cerrno>
#include <utility>

#include "current.hpp"
#include "hot.hpp"
#include "reactor_fd.hpp"

namespace urt::detail {

namespace {
// While a poll delivers completions, an executor never runs one inline
// (urt::executor::execute), even when the poll runs inside a task's
// preempt_point() at the task's own priority: it spawns it.
struct delivering {
  bool outer = std::exchange(current.delivering_io, true);
  delivering() = default;
  delivering(const delivering&) = delete;
  delivering& operator=(const delivering&) = delete;
  ~delivering() { current.delivering_io = outer; }
};
}  // namespace

std::size_t io_poller::rescue() {
  if (!lease_.try_share()) return 0;
  const io_lease::shared hold(lease_);
  const delivering scope;
  return io_.poll();
}

bool io_poller::open_ready_ring() {
  if (!cfg_.ready_ring) return false;
  const int epoll_fd = reactor_epoll_fd(io_);
  int error = EOPNOTSUPP;  // no epoll descriptor: Asio's reactor is not the epoll one
  if (epoll_fd >= 0) error = ring_.open(epoll_fd) ? 0 : ring_.open_error();
  ring_error_.store(error, std::memory_order_relaxed);
  return error == 0;
}

URT_HOT std::size_t io_poller::poll(clock::time_point now) {
  last_ = now;
  poll_soon_ = false;
  lease_.looked(now);
  // Before the poll: an event after this take marks the ring again
  // (ready_ring.hpp). Not while polls run completions: the ring stays
  // marked, and each interval polls, as without it, with no
  // io_uring_enter.
  if (!flowing_ && ring_.active()) {
    ring_.take();
    if (!ring_.active()) ring_error_.store(ring_.open_error(), std::memory_order_relaxed);
  }
  const delivering scope;
  const std::size_t ran = io_.poll();
  flowing_ = ran > 0;
  polls_.store(polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  handlers_.store(handlers_.load(std::memory_order_relaxed) + ran, std::memory_order_relaxed);
  return ran;
}

}  // namespace urt::detail
