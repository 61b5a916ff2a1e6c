// parker: how a worker with nothing to run waits for work: spin for the
// idle spin (fixed or adapted by idle_window), then park on its doorbell
// until the next wake-up (on the doorbell's futex with that deadline, or,
// with I/O outstanding, in the io_context with the alarm set for it); for
// a timed release wake early by the timer advance (fixed timer_spin, or
// learned by wake_advance) and spin to the release. It owns the doorbell and the alarm. It never
// runs migration: the worker hands it the deadlines to wake for (the next
// release, the token check the balancer asked for) and the checks that end
// the wait early.
//
// Concurrency: owner only, except ring() and parking(), which any thread
// may call (the doorbell's protocol: doorbell.hpp), and the counters it
// writes (worker_counters: relaxed statistics, read by anyone). Whatever it
// does in the io_context (arming, the alarm, the parked wait) it does
// holding the io_context's lease exclusively, so that no rescuer polling
// the context for a stuck owner (io_rescue.hpp) runs at the same time and
// the doorbell's and alarm's handlers a rescuer ran are ordered with it.
// Progress: idle() blocks until a ring or the deadline; in the io_context
// also until another handler of it (an I/O completion) runs.
#pragma once

#include <asio/io_context.hpp>

#include <chrono>
#include <cstdint>

#include "alarm.hpp"
#include "clock_now.hpp"
#include "doorbell.hpp"
#include "function_ref.hpp"
#include "idle_window.hpp"
#include "io_rescue.hpp"
#include "urt/options.hpp"
#include "urt/timer.hpp"
#include "wake_advance.hpp"
#include "worker_counters.hpp"

namespace urt::detail {

class parker {
 public:
  /// The options the parker follows.
  struct config {
    std::chrono::nanoseconds idle_spin{0};
    spin_policy idle_spin_policy = spin_policy::fixed;
    std::chrono::nanoseconds timer_spin{0};
    timer_wake_mode timer_wake = timer_wake_mode::at_release;
    static config from(const runtime_options& o) noexcept {
      return {o.idle_spin, o.idle_spin_policy, o.timer_spin, o.timer_wake};
    }
  };
  /// What ends a wait early: work became visible (the spin to a release
  /// stops for it too), or the runtime changed state.
  struct wake_checks {
    function_ref<bool()> work_pending;
    function_ref<bool()> state_changed;
    /// Whether I/O is outstanding: the wait must then be in the reactor,
    /// else it is on the doorbell's futex (doorbell.hpp).
    function_ref<bool()> io_outstanding;
  };

  /// Creates the doorbell's eventfd and the alarm's timerfd in `io` (throws
  /// std::system_error). `lease` is the right to run `io` (io_rescue.hpp):
  /// the parker takes it for everything it does in `io`.
  parker(asio::io_context& io, io_lease& lease, config cfg, worker_counters& counters);

  /// Owner, before its loop / after it: starts and ends the doorbell's wait.
  void arm() {
    const io_lease::exclusive hold(lease_);
    bell_.arm();
    lease_.looked(clock_now());
  }
  void disarm() {
    const io_lease::exclusive hold(lease_);
    bell_.disarm();
    alarm_.disarm();
  }
  /// Any thread: wakes the owner if it is parking; true when it wrote the
  /// doorbell (see doorbell.hpp for the ordering it guarantees).
  bool ring() noexcept { return bell_.ring(); }
  /// Any thread: whether the owner is (about to be) asleep on its doorbell.
  [[nodiscard]] bool parking() const noexcept { return bell_.parking(); }
  /// Any thread: parking and not rung yet (doorbell::asleep()).
  [[nodiscard]] bool asleep() const noexcept { return bell_.asleep(); }
  /// Doorbell writes that woke the owner (owner writes, anyone reads).
  [[nodiscard]] std::uint64_t rings_received() const noexcept { return bell_.received(); }

  /// Owner: waits until `checks` report, or until `token_check`, or until
  /// the timed release `release` is due (time_point::max(): none), waking
  /// timer_lead() early for the release and spinning to it. True when the
  /// parked wait ran a handler of the io_context other than the doorbell's
  /// and the alarm's (an I/O completion: io_poller.hpp).
  bool idle(clock::time_point release, clock::time_point token_check, wake_checks checks);

  /// The idle spin now and the timer advance now, for worker_stats.
  [[nodiscard]] std::chrono::nanoseconds reported_idle_spin() const noexcept;
  [[nodiscard]] std::chrono::nanoseconds reported_timer_advance() const noexcept;

  /// Owner: it ran a task since its last wait (the next wait may spin).
  void worked() noexcept { checked_idle_ = false; }

 private:
  // How long to spin when going idle now (idle_spin_policy).
  [[nodiscard]] std::chrono::nanoseconds idle_spin() const noexcept;
  // Whether the adaptive advance is in use (and learns).
  [[nodiscard]] bool learning_advance() const noexcept;
  // How long before its release the next timed release wakes a parked worker.
  [[nodiscard]] std::chrono::nanoseconds timer_lead() const noexcept;
  // Spins from `woke` to the release `due`, when the worker woke for it
  // early (at `wake` = due - timer_lead() or later), unless work shows up or
  // the state changes (stop() began).
  void spin_to(clock::time_point due, clock::time_point wake, clock::time_point woke,
               const wake_checks& checks) noexcept;

  const config cfg_;
  worker_counters& counters_;
  asio::io_context& io_;
  io_lease& lease_;
  doorbell bell_;
  alarm alarm_;
  wake_advance advance_;  // timer_wake::adaptive: learned from parked wake-ups
  idle_window window_;    // spin_policy::adaptive: the idle spin now
  // The last wait ended at a check (`token_check`: a token hop, a peer's
  // stranded inbox or stale reactor, a budget period) with no work and no
  // change of state: the next one parks at once instead of spinning. A
  // worker idle beside a running peer with I/O outstanding checks that
  // peer's reactor every io_poll_interval + ipi_timeout; spinning between
  // the checks kept it busy for as long as the peer ran (100% of a CPU
  // beside a long urt-kv WORK).
  bool checked_idle_ = false;
};

}  // namespace urt::detail
