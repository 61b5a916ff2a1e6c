// doorbell: a worker's user-space IPI: whoever publishes work for a parked
// worker rings it, and only a parked worker costs the ringer a system call.
//
// A parked worker waits on one of two channels, and says which when it
// announces that it parks:
//   - in its reactor (io_context::run_one, with a wait armed on the
//     doorbell's eventfd), when it has I/O outstanding (io_poller.hpp): an
//     I/O completion must wake it as well as a ring, and epoll waits for
//     both. The ringer writes the eventfd.
//   - on the doorbell word itself (a futex), when it has no I/O
//     outstanding: nothing but a ring or its own deadline can give it
//     work, and a futex wait and wake cost less than an eventfd through
//     epoll (no epoll callback and ready list on the ringer's side, no
//     reactor dispatch, eventfd read and epoll_ctl re-arm on the owner's).
//     The ringer calls FUTEX_WAKE.
//
// Protocol (a Dekker pair, both sides seq_cst):
//   owner:  announce_parking(channel)  [word = channel; fence]  then
//           re-check its inbox and state; park only if both are unchanged.
//   ringer: publish the work (inbox enqueue, state store); ring()  [fence;
//           if the word holds a channel, compare-exchange it to rung and,
//           if that succeeded, wake the channel].
// Either the owner's re-check sees the work, or the ringer sees the
// channel; both fences are seq_cst, so they cannot both miss. The
// compare-exchange makes exactly one ringer pay the system call per
// parking episode; a ringer that finds the word rung, or loses the
// exchange, leaves the wake-up to the one that won (the owner, once awake,
// re-checks before it parks again, so what it published is seen). The
// word stays rung until the owner runs again and says so
// (cancel_parking), so others can tell a worker that is being woken from
// one that is awake (placement.hpp). A futex waiter sleeps only while the
// word still holds channel::futex (the kernel compares it under the
// futex's lock), so a ring between the re-check and the wait makes the
// wait return at once.
//
// Concurrency: ring() from any number of threads, concurrently with the
// owner; every other member only on the owner. ring() is wait-free.
#pragma once

#include <asio/io_context.hpp>

#include <atomic>
#include <cstdint>

#include "urt/timer.hpp"
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

  /// Where a parked owner waits (see the top).
  enum class channel : std::uint32_t { reactor = 1, futex = 2 };

  /// Owner: says it is about to park on `ch`. Must be followed by a
  /// re-check of everything a ringer may have published, then by a park
  /// (run_one for reactor, wait() for futex) or cancel_parking().
  void announce_parking(channel ch) noexcept {
    word_.store(static_cast<std::uint32_t>(ch), std::memory_order_seq_cst);
    // Pairs with the fence in ring(): orders the store above before the
    // owner's re-check loads.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  /// Owner: no longer parking. Relaxed: a ringer that still sees a channel
  /// only pays one spurious wake-up (an eventfd write the next reactor park
  /// drains, or a FUTEX_WAKE with no waiter).
  void cancel_parking() noexcept { word_.store(awake, std::memory_order_relaxed); }

  /// Owner, after announce_parking(channel::futex) and its re-check:
  /// sleeps until a ring or until `until` (time_point::max(): no
  /// deadline). True when a ring ended it (the word was swapped to rung),
  /// false at the deadline.
  bool wait(clock::time_point until) noexcept;

  /// Any thread, after publishing work: wakes the owner if it is parking.
  /// Returns true when it paid the wake-up (an eventfd write or FUTEX_WAKE).
  bool ring() noexcept {
    // Pairs with the fence in announce_parking(): orders the ringer's
    // publication before its load of the word.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::uint32_t was = word_.load(std::memory_order_relaxed);
    if (was == awake || was == rung) return false;
    // Only the ringer that swaps the channel for rung wakes it; one
    // attempt (a failure means another ringer won or the owner woke).
    // acq_rel: its release pairs with the acquire loads in wait().
    if (!word_.compare_exchange_strong(was, rung, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      return false;
    }
    if (was == static_cast<std::uint32_t>(channel::futex)) {
      wake_futex();
    } else {
      write_eventfd();
    }
    return true;
  }

  /// Any thread: whether the owner has announced that it is parking and
  /// not run since (asleep, or rung and not yet running). A hint; relaxed,
  /// may be stale either way.
  [[nodiscard]] bool parking() const noexcept {
    return word_.load(std::memory_order_relaxed) != awake;
  }
  /// Any thread: whether the owner is parking and nobody has rung it yet.
  /// A hint, as parking().
  [[nodiscard]] bool asleep() const noexcept {
    const std::uint32_t w = word_.load(std::memory_order_relaxed);
    return w != awake && w != rung;
  }

  /// Rings that woke the owner (completed reactor waits and rung futex
  /// waits), for stats. Owner writes, anyone reads.
  [[nodiscard]] std::uint64_t received() const noexcept {
    return fd_.completions() + futex_wakes_.load(std::memory_order_relaxed);
  }

 private:
  static constexpr std::uint32_t awake = 0;
  static constexpr std::uint32_t rung = 3;  // after the channels

  void write_eventfd() noexcept;
  void wake_futex() noexcept;

  wakeup_fd fd_;
  std::atomic<std::uint64_t> futex_wakes_{0};  // owner-written
  // The futex word: awake, the channel the owner parks on, or rung.
  // Written by ringers: a line of its own.
  alignas(64) std::atomic<std::uint32_t> word_{awake};
};

}  // namespace urt::detail
