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
// wake-up, run in the waker's context (a NIC's softirq, the thread that
// wrote to the socket), queues its work on the ring and, with
// IORING_SETUP_TASKRUN_FLAG, sets IORING_SQ_TASKRUN in the ring's flags
// word, memory the process has mapped. signalled() reads that word and
// the completion queue's tail: two loads.
//
// IORING_SETUP_DEFER_TASKRUN keeps that work queued until the worker asks
// for it (io_uring_enter with GETEVENTS, in take()). Without it (with
// COOP_TASKRUN, the ring's first form) the kernel ran the work at the
// worker's next return from any system call, and marked the thread for
// it as a signal does: a task's own epoll_wait then returned EINTR
// although no signal came (in about half the rounds of a probe, never
// without the ring; tests/unit/ready_ring_test.cpp has it as a case).
// Deferred, the worker's other system calls never see it.
//
// Protocol, owner only:
//   take(): the completions posted so far are consumed, a wake-up that
//   came is run (it posts a completion for the event that woke it) and
//   that completion consumed too, the poll re-armed if it ended; then the
//   reactor poll (epoll_wait). Every event that arrived before take() is
//   collected by the poll; every event after it marks the ring again.
//   Taking after the poll instead would lose an event that came between
//   the poll's scan and the take.
// So signalled() is false only when no event came since the last take()
// (a wake-up is never missed). A poll without a take() before it is safe
// too: the ring then stays marked, so the next look polls again. The
// io_poller does that while its polls keep running completions: one
// system call per interval, as without the ring, no io_uring_enter, and
// the wakers find the work queued already and only count.
//
// What the ring cannot see: what Asio queues in the io_context without
// an event (an operation that completed at once when started, a post to
// the io_context itself). The io_poller polls at least every
// quiet_poll_every intervals for those.
//
// The ring must be opened on the thread that will take() it: a
// DEFER_TASKRUN ring runs its work only for the thread that made it.
// Where the kernel refuses io_uring or these flags (older than 6.1,
// io_uring_disabled, a seccomp filter), open() fails and the io_poller
// polls on its interval as before. Raw system calls: one request type does
// not need liburing.
//
// Concurrency: none; owner only (the kernel writes the flags word and the
// completion queue; the loads that read them are acquires, pairing with
// the kernel's atomic updates and release stores of them).
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
  /// Why the ring is inactive: an errno value from the last open(), or
  /// from the kernel ending the poll since (-1 where it gave none); 0 when
  /// neither failed.
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

  /// Owner, right before a poll of the reactor: consumes the completions
  /// posted so far, runs a wake-up that came and consumes what it posted,
  /// and re-arms the poll if the kernel ended it (see the top). A system
  /// call only when a wake-up came or the poll is re-armed.
  void take() noexcept;

 private:
  // The flags word's bits that say a wake-up came: IORING_SQ_TASKRUN (its
  // work queued, its CQE posted when take() runs it) and
  // IORING_SQ_CQ_OVERFLOW (CQEs wait in the kernel), as <linux/io_uring.h>
  // numbers them; open() checks them against that header.
  static constexpr std::uint32_t pending_flags = (1U << 2) | (1U << 1);

  bool arm() noexcept;
  // Consumes the completion queue, re-arming the poll if it ended; false
  // when the ring failed (inactive now).
  bool consume() noexcept;
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
