// doorbell: a worker's eventfd, the user-space IPI.
//
// The owning worker parks in its io_context with an async_wait armed on the
// eventfd; any thread may ring it. A ring costs a syscall only when the
// owner has announced that it is parking, so an awake worker is never rung.
//
// Protocol (a Dekker pair, both sides seq_cst):
//   owner:  announce_parking()  [parked = true; fence]  then re-check its
//           inbox and state; park only if both are unchanged.
//   ringer: publish the work (inbox enqueue, state store); ring()  [fence;
//           if parked, exchange it to false and write the eventfd].
// Either the owner's re-check sees the work, or the ringer sees parked ==
// true; both fences are seq_cst, so they cannot both miss. The exchange
// makes exactly one ringer pay the syscall per parking episode.
//
// Concurrency: ring() from any number of threads, concurrently with the
// owner; every other member only on the owner. Wait-free.
#pragma once

#include <asio/io_context.hpp>

#include <atomic>
#include <cstdint>

#include "wakeup_fd.hpp"

namespace urt::detail {

class doorbell {
 public:
  /// Creates the eventfd (throws std::system_error) and binds it to `io`.
  explicit doorbell(asio::io_context& io);
  doorbell(const doorbell&) = delete;
  doorbell& operator=(const doorbell&) = delete;

  /// Owner: arms the wait; the next ring completes it and ends the owner's
  /// io_context::run_one().
  void arm() { fd_.arm(); }
  /// Owner, before announce_parking(): when the last wait completed, drains
  /// the eventfd (so that old rings do not complete the new wait at once)
  /// and arms a new one; nothing while a wait is pending. Deferred to here
  /// so that a woken worker goes to its task without a system call. A ring
  /// between the drain and the new wait is not lost: Asio re-registers the
  /// fd for the wait (EPOLL_CTL_MOD), which reports it readable again.
  void rearm() {
    if (fd_.waiting()) return;
    fd_.drain();
    fd_.arm();
  }
  /// Owner: cancels the wait (before the io_context is stopped or destroyed).
  void disarm() { fd_.disarm(); }

  /// Owner: says it is about to park. Must be followed by a re-check of
  /// everything a ringer may have published, then by park or cancel_parking.
  void announce_parking() noexcept {
    parked_.store(true, std::memory_order_seq_cst);
    // Pairs with the fence in ring(): orders the store above before the
    // owner's re-check loads.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  /// Owner: no longer parking. Relaxed: a ringer that still sees true only
  /// pays one spurious eventfd write, which the next park consumes.
  void cancel_parking() noexcept { parked_.store(false, std::memory_order_relaxed); }

  /// Any thread, after publishing work: wakes the owner if it is parking.
  /// Returns true when it wrote the eventfd.
  bool ring() noexcept {
    // Pairs with the fence in announce_parking(): orders the ringer's
    // publication before its load of parked_.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!parked_.load(std::memory_order_relaxed)) return false;
    // acq_rel exchange: only the ringer that flips true -> false writes.
    if (!parked_.exchange(false, std::memory_order_acq_rel)) return false;
    write_eventfd();
    return true;
  }

  /// Any thread: whether the owner has announced that it is parking (a
  /// hint; relaxed, may be stale either way).
  [[nodiscard]] bool parking() const noexcept { return parked_.load(std::memory_order_relaxed); }

  /// Rings that woke the owner (completed waits), for stats. Owner writes,
  /// anyone reads.
  [[nodiscard]] std::uint64_t received() const noexcept { return fd_.completions(); }

 private:
  void write_eventfd() noexcept;

  wakeup_fd fd_;
  alignas(64) std::atomic<bool> parked_{false};  // written by ringers: own line
};

}  // namespace urt::detail
