// urt/timer.hpp: the runtime's clock and the handle of a periodic task.
#pragma once

#include <atomic>
#include <chrono>
#include <utility>

namespace urt {

/// The clock of timed releases: CLOCK_MONOTONIC, as cyclictest uses.
using clock = std::chrono::steady_clock;

namespace detail {
/// Shared by a periodic series and its handle; freed by whichever lets go last.
struct periodic_state {
  std::atomic<int> refs{2};
  std::atomic<bool> cancelled{false};
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

  /// Ends the series: no release starts after the worker sees the flag (a
  /// release already running finishes). Thread-safe; idempotent.
  void cancel() noexcept {
    // Release: pairs with the acquire load on the worker before each re-arm.
    if (state_ != nullptr) state_->cancelled.store(true, std::memory_order_release);
  }
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

 private:
  void reset() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->release();
  }
  detail::periodic_state* state_ = nullptr;
};

}  // namespace urt
