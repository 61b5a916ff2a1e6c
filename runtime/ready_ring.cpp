#include "ready_ring.hpp"

#include <linux/io_uring.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace urt::detail {

namespace {

// The request's tag: the ring holds only the one poll.
constexpr std::uint64_t poll_tag = 1;

int setup(unsigned entries, io_uring_params& params) noexcept {
  return static_cast<int>(::syscall(__NR_io_uring_setup, entries, &params));
}

int enter(int fd, unsigned submit, unsigned flags) noexcept {
  return static_cast<int>(::syscall(__NR_io_uring_enter, fd, submit, 0U, flags, nullptr, 0U));
}

template <class T>
T* at(void* base, std::uint32_t offset) noexcept {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

}  // namespace

bool ready_ring::open(int epoll_fd) noexcept {
  static_assert(pending_flags == (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
  close();
  error_ = 0;
  io_uring_params params{};
  // The wake-up's work waits for take(), on this thread alone (see the
  // header); the flag says it came. A completion queue a few entries
  // long: take() consumes before it lets the kernel post, so the one
  // poll rarely has more than one completion waiting (an overflow is
  // flushed by take() like a wake-up).
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                 IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_CQSIZE;
  params.cq_entries = 16;
  const int fd = setup(1, params);
  if (fd < 0) {
    error_ = errno;
    return false;
  }
  fd_ = fd;
  epoll_fd_ = epoll_fd;
  sq_map_size_ = params.sq_off.array + params.sq_entries * sizeof(unsigned);
  cq_map_size_ = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
  const bool single = (params.features & IORING_FEAT_SINGLE_MMAP) != 0;
  if (single) sq_map_size_ = cq_map_size_ = std::max(sq_map_size_, cq_map_size_);
  const auto map = [fd](std::size_t size, off_t offset) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, offset);
    return p == MAP_FAILED ? nullptr : p;
  };
  sq_map_ = map(sq_map_size_, IORING_OFF_SQ_RING);
  if (sq_map_ != nullptr) cq_map_ = single ? sq_map_ : map(cq_map_size_, IORING_OFF_CQ_RING);
  sqes_size_ = params.sq_entries * sizeof(io_uring_sqe);
  if (cq_map_ != nullptr) sqes_ = map(sqes_size_, IORING_OFF_SQES);
  if (sqes_ == nullptr) {
    fail(errno);
    return false;
  }
  sq_flags_ = at<unsigned>(sq_map_, params.sq_off.flags);
  sq_tail_ = at<unsigned>(sq_map_, params.sq_off.tail);
  sq_mask_ = at<unsigned>(sq_map_, params.sq_off.ring_mask);
  sq_array_ = at<unsigned>(sq_map_, params.sq_off.array);
  cq_head_ = at<unsigned>(cq_map_, params.cq_off.head);
  cq_tail_ = at<unsigned>(cq_map_, params.cq_off.tail);
  cq_mask_ = at<unsigned>(cq_map_, params.cq_off.ring_mask);
  cqes_ = at<void>(cq_map_, params.cq_off.cqes);
  return arm();
}

bool ready_ring::arm() noexcept {
  // The one submission slot: the previous request was consumed at its
  // submission (io_uring_enter returned it submitted).
  const unsigned tail = *sq_tail_;
  const unsigned index = tail & *sq_mask_;
  auto* sqe = static_cast<io_uring_sqe*>(sqes_) + index;
  std::memset(sqe, 0, sizeof *sqe);
  sqe->opcode = IORING_OP_POLL_ADD;
  sqe->fd = epoll_fd_;
  // poll32_events is read as is on a little-endian CPU (the kernel swaps
  // its halves on a big-endian one).
  static_assert(std::endian::native == std::endian::little);
  sqe->poll32_events = POLLIN;
  sqe->len = IORING_POLL_ADD_MULTI;
  sqe->user_data = poll_tag;
  sq_array_[index] = index;
  // Release: the kernel reads the entry after it sees the new tail.
  __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
  if (enter(fd_, 1, 0) != 1) {
    fail(errno);
    return false;
  }
  return true;
}

bool ready_ring::consume() noexcept {
  const unsigned head = *cq_head_;
  // Acquire: pairs with the kernel's release store of the tail after it
  // wrote the entries.
  const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
  bool rearm = false;
  for (unsigned i = head; i != tail; ++i) {
    const auto& cqe = static_cast<const io_uring_cqe*>(cqes_)[i & *cq_mask_];
    // The last completion of a multishot poll comes without F_MORE: the
    // poll ended (an error, or the kernel could not post one).
    if ((cqe.flags & IORING_CQE_F_MORE) == 0) {
      if (cqe.res < 0) {
        fail(-cqe.res);  // the kernel cannot poll it: back to the interval
        return false;
      }
      rearm = true;
    }
  }
  // Release: the kernel may reuse the entries once it sees the new head.
  __atomic_store_n(cq_head_, tail, __ATOMIC_RELEASE);
  return !rearm || arm();
}

void ready_ring::take() noexcept {
  if (fd_ < 0 || !consume()) return;
  // A wake-up came (or completions wait in the kernel): run it, and
  // consume what it posted. Acquire: pairs with the kernel's atomic set
  // of the flags.
  if ((__atomic_load_n(sq_flags_, __ATOMIC_ACQUIRE) & pending_flags) == 0) return;
  if (enter(fd_, 0, IORING_ENTER_GETEVENTS) < 0) {
    // A signal (EINTR) or a full queue (EBUSY) leaves the ring marked:
    // the next take() tries again.
    if (errno != EINTR && errno != EBUSY) fail(errno);
    return;
  }
  consume();
}

void ready_ring::fail(int error) noexcept {
  const int kept = error != 0 ? error : -1;
  close();
  error_ = kept;
}

void ready_ring::close() noexcept {
  if (sqes_ != nullptr) ::munmap(sqes_, sqes_size_);
  if (cq_map_ != nullptr && cq_map_ != sq_map_) ::munmap(cq_map_, cq_map_size_);
  if (sq_map_ != nullptr) ::munmap(sq_map_, sq_map_size_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  sq_map_ = cq_map_ = sqes_ = nullptr;
  sq_flags_ = sq_tail_ = sq_mask_ = sq_array_ = cq_head_ = cq_tail_ = cq_mask_ = nullptr;
  cqes_ = nullptr;
}

}  // namespace urt::detail
