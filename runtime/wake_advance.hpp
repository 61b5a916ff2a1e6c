// wake_advance: how long before a timed release a parked worker sets its
// alarm, learned from how late its alarms wake it.
//
// A parked worker does not run the instant its alarm expires: the timer
// interrupt arrives late, the CPU leaves its idle state, the scheduler
// switches the thread in and epoll_wait returns. On bare metal that lateness
// is a few microseconds; in a virtual machine it is tens (15-40 us on the
// VM urt is developed on, with a hard floor of about 15 us). cyclictest
// measures exactly this lateness for the kernel's own sleep.
//
// The adaptive advance is the user-space analogue of KVM's adaptive
// lapic_timer_advance_ns, which hides the same lateness from guests: arm
// the alarm `value()` before the release; when the wake-up comes early,
// spin the rest of the way; when it comes late, the release starts
// `value()` sooner than it would have. observe() tracks a quantile of the
// lateness by stochastic approximation: each sample moves the estimate up
// by up_ when the wake-up was later than it, down by down_ when earlier,
// so it settles where a fraction up_ / (up_ + down_) of samples are
// earlier. At the median (the default) half the wake-ups come early and
// spin for a few microseconds, and the other half start each release
// about a median lateness sooner; a lower quantile spins less and gains
// less. A fixed step makes one outlier (a multi-millisecond host stall)
// move the estimate by one step, not by its size; `max` bounds the spin
// any one release can cost.
//
// Owner-only: one worker's thread observes and reads it; no concurrency.
// A unit test drives it directly.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace urt::detail {

class wake_advance {
 public:
  using ns = std::chrono::nanoseconds;

  /// Tracks the quantile up / (up + down) of the lateness, moving by `up`
  /// on a late wake-up and `down` on an early one, within [0, max].
  constexpr wake_advance(ns max, ns up, ns down) noexcept : max_(max), up_(up), down_(down) {}
  /// The median, in quarter-microsecond steps, at most 100 us.
  constexpr wake_advance() noexcept : wake_advance(default_max, default_step, default_step) {}

  static constexpr ns default_max = std::chrono::microseconds{100};
  static constexpr ns default_step = ns{250};

  /// How long before a release to set the alarm.
  [[nodiscard]] constexpr ns value() const noexcept { return value_; }

  /// A parked wake-up by the alarm: `lateness` is when the worker ran minus
  /// when the alarm was set to expire (never negative: a timerfd does not
  /// expire early; a negative sample is taken as 0).
  constexpr void observe(ns lateness) noexcept {
    if (lateness > value_) {
      value_ = std::min(value_ + up_, max_);
    } else if (lateness < value_) {
      value_ = value_ > down_ ? value_ - down_ : ns{0};
    }
  }

 private:
  ns max_;
  ns up_;
  ns down_;
  ns value_{0};
};

}  // namespace urt::detail
