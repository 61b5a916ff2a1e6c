#include "parker.hpp"

#include <sched.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "clock_now.hpp"
#include "hot.hpp"
#include "spinlock.hpp"

namespace urt::detail {

parker::parker(asio::io_context& io, io_lease& lease, config cfg, worker_counters& counters)
    : cfg_(cfg),
      counters_(counters),
      io_(io),
      lease_(lease),
      bell_(io),
      alarm_(io),
      window_(cfg.idle_spin) {
  counters_.window_ns.store(cfg.idle_spin.count(), std::memory_order_relaxed);
}

URT_HOT bool parker::idle(clock::time_point release, clock::time_point token_check,
                          wake_checks checks) {
  const clock::time_point due = release;
  // Wake timer_lead() before the release (the advance) and spin to it; a
  // release too close to the clock's ends to subtract from wakes at itself.
  const clock::duration lead = timer_lead();
  const clock::time_point timer_wake =
      due != clock::time_point::max() && due >= clock::time_point::min() + lead ? due - lead : due;
  const clock::time_point wake = std::min(timer_wake, token_check);
  // Work became visible, the state changed, or it is time to wake for the
  // next release or the token check.
  const auto changed = [&](clock::time_point now) {
    return checks.work_pending() || checks.state_changed() ||
           (wake != clock::time_point::max() && now >= wake);
  };
  // The wait ends at a check, before any release, with nothing to do.
  const auto at_check_only = [&](clock::time_point now) {
    return token_check != clock::time_point::max() && token_check < timer_wake &&
           now >= token_check && !checks.work_pending() && !checks.state_changed();
  };
  const bool may_spin = !std::exchange(checked_idle_, false);
  const auto went_idle = clock_now();
  if (const auto spin = may_spin ? idle_spin() : std::chrono::nanoseconds{0}; spin.count() > 0) {
    const auto deadline = went_idle + spin;
    for (unsigned spins = 0;; ++spins) {
      const auto now = clock_now();
      if (changed(now)) {
        checked_idle_ = at_check_only(now);
        spin_to(due, timer_wake, now, checks);
        return false;
      }
      cpu_relax();
      if (spins % 64 == 63) {
        if (now >= deadline) break;
        ::sched_yield();
      }
    }
  }
  // No I/O outstanding: nothing but a ring or the deadline can end the
  // wait, so it sleeps on the doorbell's futex (doorbell.hpp). Else in the
  // reactor, where a completion ends it too.
  const bool in_reactor = checks.io_outstanding();
  // In the reactor, the wait and the doorbell's and alarm's state are the
  // owner's alone until it has looked (io_rescue.hpp).
  struct reactor_turn {
    io_lease* lease = nullptr;
    reactor_turn() = default;
    reactor_turn(const reactor_turn&) = delete;
    reactor_turn& operator=(const reactor_turn&) = delete;
    void end(clock::time_point now) noexcept {
      if (lease == nullptr) return;
      lease->looked(now);
      lease->unlock();
      lease = nullptr;
    }
    ~reactor_turn() { end(clock_now()); }
  } turn;
  if (in_reactor) {
    lease_.lock();
    turn.lease = &lease_;
    if (wake != clock::time_point::max()) alarm_.set(wake);
    bell_.rearm();
  }
  bell_.announce_parking(in_reactor ? doorbell::channel::reactor : doorbell::channel::futex);
  // The re-check after the announcement. Parking is safe even when a node's
  // enqueue is still in flight: its spawner rings after linking it; so do
  // a pusher after moving a task in, a token sender after its hop, and an
  // executor whose I/O work makes the count leave 0 (worker.cpp). On the
  // futex, I/O that became outstanding since the choice sends it round
  // again, to the reactor.
  if (const auto now = clock_now(); changed(now) || (!in_reactor && checks.io_outstanding())) {
    bell_.cancel_parking();
    checked_idle_ = at_check_only(now);
    turn.end(now);
    spin_to(due, timer_wake, now, checks);
    return false;
  }
  worker_counters::bump_relaxed(counters_.parks);
  const std::uint64_t alarms = alarm_.fired();
  const std::uint64_t rings = bell_.received();
  // Returns once the doorbell, the alarm or another handler (an I/O
  // completion, which spawns a task) ran. A completion's spawn may throw
  // (no memory): finish the wake-up first, then let the worker report it.
  std::size_t ran = 0;
  bool futex_deadline = false;
  std::exception_ptr error;
  if (in_reactor) {
    try {
      ran = io_.run_one();
    } catch (...) {
      ran = 1;
      error = std::current_exception();
    }
  } else {
    futex_deadline = !bell_.wait(wake);
  }
  bell_.cancel_parking();
  const auto woke = clock_now();
  turn.end(woke);
  const bool by_alarm = futex_deadline || alarm_.fired() != alarms;
  const bool by_bell = bell_.received() != rings;
  if (by_alarm && wake == timer_wake && learning_advance()) {
    // A parked wake-up by the release's alarm: how late the OS ran us.
    advance_.observe(woke - timer_wake);
    counters_.advance_ns.store(advance_.value().count(), std::memory_order_relaxed);
  }
  if (cfg_.idle_spin_policy == spin_policy::adaptive) {
    if (by_bell) {
      window_.work_after_park(woke - went_idle);
    } else if (by_alarm) {
      window_.alarm_after_park();
    }
    counters_.window_ns.store(window_.value().count(), std::memory_order_relaxed);
  }
  checked_idle_ = ran == 0 && !by_bell && at_check_only(woke);
  spin_to(due, timer_wake, woke, checks);
  if (error) std::rethrow_exception(error);
  return ran > 0 && !by_bell && !by_alarm;
}

URT_HOT std::chrono::nanoseconds parker::idle_spin() const noexcept {
  return cfg_.idle_spin_policy == spin_policy::adaptive ? window_.value() : cfg_.idle_spin;
}

bool parker::learning_advance() const noexcept {
  return cfg_.timer_spin.count() == 0 && cfg_.timer_wake == timer_wake_mode::adaptive;
}

std::chrono::nanoseconds parker::timer_lead() const noexcept {
  if (cfg_.timer_spin.count() > 0) return cfg_.timer_spin;
  return learning_advance() ? advance_.value() : std::chrono::nanoseconds{0};
}

URT_HOT void parker::spin_to(clock::time_point due, clock::time_point wake, clock::time_point woke,
                             const wake_checks& checks) noexcept {
  // The last stretch to a release that the worker woke early for is spun,
  // not slept, unless other work shows up meanwhile.
  if (due == clock::time_point::max() || woke >= due) return;
  if (woke < wake) return;  // woken early for something else
  clock::time_point now = woke;
  while (now < due) {
    // Work, or stop() (which rings every worker): the worker must look now
    // (a stop(cancel) waited out a spin of up to timer_spin, 1 s).
    if (checks.work_pending() || checks.state_changed()) break;
    cpu_relax();
    now = clock_now();
  }
  worker_counters::bump_relaxed(counters_.timer_spin_ns,
                                static_cast<std::uint64_t>((now - woke).count()));
}

std::chrono::nanoseconds parker::reported_idle_spin() const noexcept {
  return cfg_.idle_spin_policy == spin_policy::adaptive
             ? std::chrono::nanoseconds{counters_.window_ns.load(std::memory_order_relaxed)}
             : cfg_.idle_spin;
}

std::chrono::nanoseconds parker::reported_timer_advance() const noexcept {
  return cfg_.timer_spin.count() > 0
             ? cfg_.timer_spin
             : std::chrono::nanoseconds{counters_.advance_ns.load(std::memory_order_relaxed)};
}

}  // namespace urt::detail
