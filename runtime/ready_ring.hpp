// ready_ring: whether a reactor has something to report, read from memory
// instead of asked of the kernel.
//
// A busy worker with I/O outstanding polls its reactor every
// io_poll_interval (io_poller.hpp): one epoll_wait with a zero timeout,
// a system call whether or not anything arrived. On a virtual machine a
// system call costs about a microsecond (urt-io-poll-bench), so a worker
// running a long task with preempt points at a 10 us interval spent about
// a tenth of its time asking, mostly to hear that nothing had come.
//
// The ring asks the kernel once, in advance: it is an io_uring of the
// worker's own holding one multishot poll of the reactor's epoll
// descriptor for readability. An epoll descriptor wakes whoever polls it
// each time one of its descriptors gets an event; the io_uring poll's
// wake-up then marks the ring in memory shared with the process, from
// the waker's context (a NIC's softirq, the thread that wrote to the
// socket): with IORING_SETUP_COOP_TASKRUN and IORING_SETUP_TASKRUN_FLAG
// the kernel sets IORING_SQ_TASKRUN in the ring's flags word at the
// wake-up and posts the completion (a CQE) the next time the worker
// enters or leaves the kernel, without an interrupt to the running
// worker. signalled() reads that word and the completion queue's tail:
// two loads.
//
// Protocol, owner only:
//   take() (the CQEs are consumed and the poll re-armed if it ended), then
//   the reactor poll (epoll_wait): every event that arrived before take()
//   is collected by the poll; every event after it wakes the ring again.
//   Taking after the poll instead would lose an event that came between
//   the poll's scan and the take.
// So signalled() is false only when no event came since the last take()
// (a wake-up is never missed); it may be true with nothing to collect
// (the event was already collected, by this poll or a rescuer's, or its
// CQE came after the take: one poll too many).
//
// What the ring cannot see: what Asio queues in the io_context without
// an event (an operation that completed at once when started, a post to
// the io_context itself). The io_poller polls at least every
// quiet_poll_every intervals for those.
//
// The ring must be opened on the thread that will run the reactor's polls:
// the kernel posts the poll's completion from that thread's task work.
// Where the kernel refuses io_uring (older than 5.19, io_uring_disabled,
// a seccomp filter), open() fails and the io_poller polls on its interval
// as before. Raw system calls: one request type does not need liburing.
//
// Concurrency: none; owner only (the kernel writes the flags word and the
// completion queue; the loads that read them are acquires, pairing with
// the kernel's release stores and atomic updates of them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace urt::detail {

class ready_ring {
 public:
  ready_ring() noexcept = default;
  ready_ring(const ready_ring&) = delete;
  ready_ring& operator=(const ready_ring&) = delete;
  ~ready_ring() { close(); }

  /// Owner thread: sets up the ring and arms its poll of `epoll_fd`. False
  /// (and inactive) when the kernel refuses any part of it; the error is
  /// kept for stats (errno, or -1 when a completion reported it).
  bool open(int epoll_fd) noexcept;
  /// Owner: releases the ring (the poll ends with it).
  void close() noexcept;

  [[nodiscard]] bool active() const noexcept { return fd_ >= 0; }
  /// Why the last open() failed: an errno value; 0 when it did not fail.
  [[nodiscard]] int open_error() const noexcept { return error_; }

  /// Owner: whether the epoll descriptor may have had an event since the
  /// last take() (see the top). True when inactive.
  [[nodiscard]] bool signalled() const noexcept {
    if (fd_ < 0) return true;
    // Acquire: pairs with the kernel's atomic set of the flag at the
    // wake-up and its release store of the CQ tail when it posts.
    return (__atomic_load_n(sq_flags_, __ATOMIC_ACQUIRE) & pending_flags) != 0 ||
           __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE) != *cq_head_;
  }

  /// Owner, before each poll of the reactor: consumes the completions
  /// posted so far and re-arms the poll when the kernel ended it.
  void take() noexcept;

 private:
  // The flags word's bits that say a wake-up came: IORING_SQ_TASKRUN (task
  // work pending, its CQE to follow) and IORING_SQ_CQ_OVERFLOW (CQEs wait
  // in the kernel), as <linux/io_uring.h> numbers them; open() checks
  // them against that header.
  static constexpr std::uint32_t pending_flags = (1U << 2) | (1U << 1);

  bool arm() noexcept;
  void fail(int error) noexcept;

  int fd_ = -1;
  int epoll_fd_ = -1;
  int error_ = 0;
  // The mapped rings (one mapping when the kernel shares it, else two).
  void* sq_map_ = nullptr;
  std::size_t sq_map_size_ = 0;
  void* cq_map_ = nullptr;
  std::size_t cq_map_size_ = 0;
  void* sqes_ = nullptr;
  std::size_t sqes_size_ = 0;
  // Pointers into them.
  unsigned* sq_flags_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_mask_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned* cq_mask_ = nullptr;
  void* cqes_ = nullptr;
};

}  // namespace urt::detail
