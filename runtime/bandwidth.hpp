// bandwidth: one worker's budget for its FIFO class (priorities 1..99):
// at most `runtime` of FIFO time in every `period`, so that normal work
// (priority 0) queued on the worker is not starved (the kernel's RT
// throttling and its 6.12 deferred fair server, per worker).
//
// The worker accounts for itself, at its own scheduling points: tick()
// charges the time since the last look to the class it picked then (FIFO,
// normal, or idle) and rolls its period lazily when a point finds it over;
// decide() says whether the next pick may take FIFO work. must_look() skips
// both (and the clock read) where the budget cannot change the pick.
// No timer thread, no lock, nothing shared written: a unit test drives it
// with made-up time points.
//
//   deferred: once FIFO has spent `runtime` in the period and normal work
//     waits on this worker, FIFO is held back and normal work runs until
//     the period ends or the normal work runs out; with no normal work
//     waiting FIFO runs on (no forced idling). The FIFO blackout is at most
//     period - runtime, plus the rest of the normal task running when the
//     period ends (tasks are cooperative).
//   strict: at exhaustion FIFO stops on this worker until the period ends,
//     even with nothing else to run (classic RT throttling).
// While FIFO is held back the worker shows cpupri the top level, so no
// FIFO task is pushed or placed here, and its queued FIFO tasks can be
// pushed to workers that may run them (rt_queue::fifo_held).
//
// Time is wall time between scheduling points (at most one clock read per step):
// time the OS takes the worker's CPU away is charged to whatever the worker
// was running. On the isolated CPUs urt is built for the two agree; the
// thread's CPU time would cost a system call per step.
//
// Overrun: tasks are not preempted, so one picked inside the budget may
// run past it; the excess is counted (overrun_ns, overrun_events) and
// carried into the next period as used FIFO time (as the kernel carries
// rt_time), also when the task runs across the period's end, so the
// budget holds on average; within one period it holds to within the
// longest FIFO stretch between two scheduling points.
//
// Concurrency: owner only; the counters are relaxed owner-written
// statistics that stats() reads from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "urt/options.hpp"
#include "urt/priority.hpp"
#include "urt/timer.hpp"

namespace urt::detail {

/// What a worker is doing between two scheduling points.
enum class run_class : std::uint8_t { idle, normal, fifo };

[[nodiscard]] constexpr run_class class_of_task(priority_t p) noexcept {
  return p == priority_normal ? run_class::normal : run_class::fifo;
}

class bandwidth {
 public:
  /// Which queued tasks the next pick may take.
  enum class allow : std::uint8_t { any, normal_only };

  /// Owner-written statistics (relaxed; anyone reads them).
  struct counters {
    std::atomic<std::uint64_t> fifo_ns{0};
    std::atomic<std::uint64_t> normal_ns{0};
    std::atomic<std::uint64_t> idle_ns{0};
    std::atomic<std::uint64_t> throttle_events{0};  // FIFO held back (once per hold)
    std::atomic<std::uint64_t> throttled_ns{0};     // time FIFO was held back
    std::atomic<std::uint64_t> server_slices{0};    // normal tasks picked while FIFO was held
    std::atomic<std::uint64_t> overrun_ns{0};       // FIFO time past the budget by tasks picked inside it
    std::atomic<std::uint64_t> overrun_events{0};
  };

  /// A budget per `opts` (validated), its first period starting at `start`.
  bandwidth(const bandwidth_options& opts, clock::time_point start) noexcept;

  /// Owner, at a scheduling point: new parameters (validated) from now on.
  /// The time so far is charged under the old ones; a hold ends, and a new
  /// period starts at `now`, so a change takes effect within one period.
  /// After suspend(), nothing is charged for the time suspended: the budget
  /// starts afresh. Callers skip it when has() the same parameters: an
  /// unchanged budget keeps its period, its use and its hold (another
  /// budget's change must not hand this one a new period).
  void configure(const bandwidth_options& opts, clock::time_point now) noexcept;
  /// Whether the budget has these parameters (and is not suspended).
  [[nodiscard]] bool has(const bandwidth_options& opts) const noexcept {
    return !suspended_ && opts.mode == mode_ && opts.runtime == runtime_ && opts.period == period_;
  }
  /// Owner, at a scheduling point: the budget is dropped (its group's budget
  /// was removed). The time until `now` is charged and a hold ends there;
  /// then nothing is measured until configure() gives it parameters again.
  void suspend(clock::time_point now) noexcept;
  /// Owner: a hold in progress ends at `now` (stop() began: nothing is held
  /// back any more), its time counted.
  void release(clock::time_point now) noexcept {
    if (holding_) end_hold(now);
  }

  /// Whether the budget is enforced at all (mode != off); when not, the
  /// worker never calls the members below and pays no clock read.
  [[nodiscard]] bool active() const noexcept { return mode_ != throttle_mode::off; }

  /// Owner, at a scheduling point, before reading the clock: whether this
  /// point needs tick() and decide(), given the class the pick would take
  /// without a budget (`next`) and whether normal work waits. Not when the
  /// worker goes on in the class it runs and the budget cannot hold it
  /// back: FIFO after FIFO under deferred with no normal work waiting, or
  /// normal after normal. The time is charged at the next point that looks
  /// (the class did not change meanwhile), so the totals stay exact and a
  /// stream of FIFO tasks with no normal work pays no clock read per task.
  [[nodiscard]] bool must_look(run_class next, bool normal_waiting) const noexcept {
    if (holding_ || next != running_) return true;
    return next == run_class::fifo && (mode_ == throttle_mode::strict || normal_waiting);
  }
  /// Owner, at a scheduling point (`now` never goes backwards): charges the
  /// time since the last one to what was picked then, rolling the period
  /// when it is over.
  void tick(clock::time_point now) noexcept;
  /// Owner, after tick(now): what the pick may take, given whether normal
  /// work waits on this worker. Starts or ends holding FIFO back.
  allow decide(clock::time_point now, bool normal_waiting) noexcept;
  /// Owner: what the pick took (idle when nothing), charged at the next tick.
  void picked(run_class c) noexcept;

  /// Whether decide() would hold FIFO back now: the budget is spent and
  /// the mode holds (strict, or deferred with normal work waiting). A
  /// running FIFO task asks this at a preemption point, after tick().
  [[nodiscard]] bool would_hold(bool normal_waiting) const noexcept {
    return fifo_used_ >= runtime_ && (mode_ == throttle_mode::strict || normal_waiting);
  }
  /// Whether FIFO is held back now (decide() said normal_only).
  [[nodiscard]] bool holding() const noexcept { return holding_; }
  /// When the current period ends: a worker holding FIFO back with nothing
  /// to run wakes then.
  [[nodiscard]] clock::time_point period_end() const noexcept { return period_start_ + period_; }
  /// FIFO time spent in the current period (as of the last tick).
  [[nodiscard]] clock::duration fifo_used() const noexcept { return fifo_used_; }
  [[nodiscard]] const counters& stats() const noexcept { return counters_; }

 private:
  // Adds `d` to the total of class `c`.
  void charge(run_class c, clock::duration d) noexcept;
  // Adds `d` of FIFO time to the current period's use; past the budget, by
  // a task picked inside it, that is overrun.
  void use_fifo(clock::duration d) noexcept;
  void end_hold(clock::time_point at) noexcept;
  // Counts the hold's time up to `at` (at or after held_since_).
  void count_hold(clock::time_point at) noexcept;

  throttle_mode mode_;
  clock::duration runtime_;
  clock::duration period_;
  clock::time_point period_start_;
  clock::time_point last_;          // the last tick
  clock::duration fifo_used_{0};    // in the current period
  clock::duration period_overrun_{0};  // overrun in the current period: the next one's debt
  run_class running_ = run_class::idle;  // picked at the last scheduling point
  bool picked_in_budget_ = false;   // ... and it was FIFO picked with budget left
  bool holding_ = false;
  bool suspended_ = false;
  clock::time_point held_since_{};  // counted up to here in throttled_ns
  counters counters_;
};

}  // namespace urt::detail
