// idle_window: how long an idle worker spins before it parks, adapted to
// when its work really arrives, the way KVM adapts halt polling
// (halt_poll_ns in virt/kvm/kvm_main.c).
//
// Spinning pays off only when work comes soon after a worker goes idle (a
// burst of spawns): it then starts without a park, a doorbell write and a
// wake-up. When work comes later than the spin, or the worker's next event
// is its own alarm (a timed release, already met early by wake_advance),
// the spin is CPU burnt for nothing: a 1 kHz periodic task with a 50 us
// spin spends 5% of a CPU on it.
//
// The rule, per idle period that ended in a park:
//   - work arrived (a doorbell) within `max` of going idle: a longer spin
//     would have caught it; grow: 0 -> `start`, else double, up to `max`.
//   - work arrived later than `max`, or the alarm ended it: shrink: halve,
//     and below `start` drop to 0 (park at once).
// An idle period that ended while spinning leaves the window as it is.
// It starts at `max`, so a burst at start-up is served by spinning.
//
// Owner-only: one worker's thread updates and reads it; no concurrency.
// A unit test drives it directly.
#pragma once

#include <algorithm>
#include <chrono>

namespace urt::detail {

class idle_window {
 public:
  using ns = std::chrono::nanoseconds;

  /// Spins at most `max`; grows from 0 to `start` first.
  constexpr idle_window(ns max, ns start) noexcept
      : max_(max), start_(max > ns{0} ? std::clamp(start, ns{1}, max) : ns{0}), value_(max) {}
  explicit constexpr idle_window(ns max) noexcept : idle_window(max, default_start) {}

  static constexpr ns default_start = std::chrono::microseconds{2};

  /// How long to spin before parking now.
  [[nodiscard]] constexpr ns value() const noexcept { return value_; }

  /// A parked idle period ended by work (a doorbell) `idle` after the
  /// worker went idle.
  constexpr void work_after_park(ns idle) noexcept {
    if (idle <= max_) {
      grow();
    } else {
      shrink();
    }
  }
  /// A parked idle period ended by the worker's alarm (nothing to run came
  /// meanwhile).
  constexpr void alarm_after_park() noexcept { shrink(); }

 private:
  constexpr void grow() noexcept {
    value_ = value_ < start_ ? start_ : std::min(value_ * 2, max_);
  }
  constexpr void shrink() noexcept {
    value_ /= 2;
    if (value_ < start_) value_ = ns{0};
  }

  ns max_;
  ns start_;
  ns value_;
};

}  // namespace urt::detail
