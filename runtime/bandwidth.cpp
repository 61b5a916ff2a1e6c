#include "bandwidth.hpp"

#include <algorithm>

#include "hot.hpp"
#include "worker_counters.hpp"

namespace urt::detail {
namespace {

std::uint64_t ns(clock::duration d) noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace

bandwidth::bandwidth(const bandwidth_options& opts, clock::time_point start) noexcept
    : mode_(opts.mode),
      runtime_(opts.runtime),
      period_(opts.period),
      period_start_(start),
      last_(start) {}

void bandwidth::configure(const bandwidth_options& opts, clock::time_point now) noexcept {
  if (!suspended_) {
    if (active()) tick(now);
    if (holding_) end_hold(std::max(now, held_since_));
  }
  suspended_ = false;
  mode_ = opts.mode;
  runtime_ = opts.runtime;
  period_ = opts.period;
  period_start_ = std::max(now, last_);
  last_ = period_start_;
  fifo_used_ = clock::duration{0};
  period_overrun_ = clock::duration{0};
  picked_in_budget_ = false;
}

void bandwidth::suspend(clock::time_point now) noexcept {
  if (suspended_) return;
  if (active()) tick(now);
  if (holding_) end_hold(std::max(now, held_since_));
  running_ = run_class::idle;
  suspended_ = true;
}

URT_HOT void bandwidth::tick(clock::time_point now) noexcept {
  if (now <= last_) return;
  charge(running_, now - last_);  // the totals take all of it
  clock::time_point from = last_;  // the budget's share starts here
  if (const clock::time_point end = period_end(); now >= end) {
    // A FIFO task running across the period's end used the old period's
    // budget up to the end: past the budget, that part is overrun (and the
    // next period's debt, below) like any other. Skipping it would let a
    // FIFO task picked just inside the budget escape the hold every period
    // (FIFO tasks of 2 ms next to a 9.5/10 ms budget left normal work
    // nothing).
    if (running_ == run_class::fifo) use_fifo(end - from);
    // The period is over: FIFO may run again, and the new period is the
    // one `now` falls in (a long idle or a long task may span several; the
    // options bound the period so that this cannot overflow). Only the
    // part after its start counts against the new budget.
    if (holding_) end_hold(end);
    const clock::duration skipped = ((now - end) / period_) * period_;
    period_start_ = end + skipped;
    // Overrun by tasks picked inside the budget is a debt the next period
    // pays (the kernel carries rt_time over the same way), so that normal
    // work gets its share on average even with long FIFO tasks; a roll over
    // more than one period (a long idle, or one task longer than a period)
    // forgives it.
    fifo_used_ = skipped.count() == 0 ? std::min(period_overrun_, runtime_) : clock::duration{0};
    period_overrun_ = clock::duration{0};
    from = period_start_;
    picked_in_budget_ = false;  // a task that spans periods overran the old one, not this
  }
  if (running_ == run_class::fifo) use_fifo(now - from);
  last_ = now;
}

void bandwidth::use_fifo(clock::duration d) noexcept {
  const clock::duration before = fifo_used_;
  fifo_used_ += d;
  if (picked_in_budget_ && fifo_used_ > runtime_) {
    // Picked with budget left, it ran past it: the excess is overrun.
    const clock::duration excess = fifo_used_ - std::max(before, runtime_);
    period_overrun_ += excess;
    worker_counters::bump_relaxed(counters_.overrun_ns, ns(excess));
    worker_counters::bump_relaxed(counters_.overrun_events);
    picked_in_budget_ = false;  // one event per task
  }
}

void bandwidth::charge(run_class c, clock::duration d) noexcept {
  switch (c) {
    case run_class::fifo:
      worker_counters::bump_relaxed(counters_.fifo_ns, ns(d));
      break;
    case run_class::normal:
      worker_counters::bump_relaxed(counters_.normal_ns, ns(d));
      break;
    case run_class::idle:
      worker_counters::bump_relaxed(counters_.idle_ns, ns(d));
      break;
  }
}

URT_HOT bandwidth::allow bandwidth::decide(clock::time_point now, bool normal_waiting) noexcept {
  const bool hold = would_hold(normal_waiting);
  if (hold && !holding_) {
    holding_ = true;
    held_since_ = now;
    worker_counters::bump_relaxed(counters_.throttle_events);
  } else if (!hold && holding_) {
    end_hold(now);  // deferred: the normal work ran out before the period did
  } else if (holding_) {
    count_hold(now);  // a hold in progress shows in the stats as it goes
  }
  return holding_ ? allow::normal_only : allow::any;
}

URT_HOT void bandwidth::picked(run_class c) noexcept {
  running_ = c;
  picked_in_budget_ = c == run_class::fifo && fifo_used_ < runtime_;
  if (c == run_class::normal && holding_) worker_counters::bump_relaxed(counters_.server_slices);
}

void bandwidth::end_hold(clock::time_point at) noexcept {
  count_hold(at);
  holding_ = false;
}

void bandwidth::count_hold(clock::time_point at) noexcept {
  if (at <= held_since_) return;
  worker_counters::bump_relaxed(counters_.throttled_ns, ns(at - held_since_));
  held_since_ = at;
}

}  // namespace urt::detail
