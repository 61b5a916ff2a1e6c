// urt/timer.hpp: the runtime's clock and the handle of a periodic task.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

namespace urt {

/// The clock of timed releases: CLOCK_MONOTONIC, as cyclictest uses.
using clock = std::chrono::steady_clock;

/// What a periodic series does with releases whose time has already
/// passed when the previous one finishes (an overrun, or a stall). Either
/// way every release stays on the grid start + k * period.
enum class overrun_policy : unsigned char {
  /// Run every missed release, back to back, each with its own release time.
  catch_up,
  /// Skip the releases already past: the next one is the first at or after
  /// the time the previous one finished (as cyclictest and POSIX timers do);
  /// periodic_task::skipped() counts them.
  skip,
};

namespace detail {
/// Shared by a periodic series and its handle; freed by whichever lets go last.
struct periodic_state {
  explicit periodic_state(overrun_policy p) noexcept : overrun(p) {}
  const overrun_policy overrun;
  std::atomic<int> refs{2};
  std::atomic<bool> cancelled{false};
  /// Releases skipped (overrun_policy::skip); written by the series' worker
  /// only, read by the handle (relaxed: a statistic).
  std::atomic<std::uint64_t> skipped{0};
  void release() noexcept {
    // acq_rel: the last owner sees every write of the other before deleting.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};
}  // namespace detail

/// The handle runtime::every() returns. Move-only; destroying it does not
/// cancel the series (it keeps running until cancel() or stop()).
class periodic_task {
 public:
  periodic_task() = default;
  explicit periodic_task(detail::periodic_state* state) noexcept : state_(state) {}
  periodic_task(periodic_task&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
  periodic_task& operator=(periodic_task&& o) noexcept {
    if (this != &o) {
      reset();
      state_ = std::exchange(o.state_, nullptr);
    }
    return *this;
  }
  periodic_task(const periodic_task&) = delete;
  periodic_task& operator=(const periodic_task&) = delete;
  ~periodic_task() { reset(); }

  /// Ends the series: no release starts after the worker sees the flag,
  /// which it reads as it starts each release, a release already queued
  /// behind more urgent work included (a release already running
  /// finishes). Thread-safe; idempotent.
  void cancel() noexcept {
    // Release: pairs with the acquire load on the worker before each re-arm.
    if (state_ != nullptr) state_->cancelled.store(true, std::memory_order_release);
  }
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  /// Releases skipped so far under overrun_policy::skip (0 for catch_up or
  /// an empty handle). May trail the worker by a release.
  [[nodiscard]] std::uint64_t skipped() const noexcept {
    return state_ != nullptr ? state_->skipped.load(std::memory_order_relaxed) : 0;
  }

 private:
  void reset() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->release();
  }
  detail::periodic_state* state_ = nullptr;
};

}  // namespace urt
