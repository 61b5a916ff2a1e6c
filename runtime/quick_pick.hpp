// quick_pick: when a worker may take its next task without a full
// scheduling step.
//
// A full step (worker::step) takes in the inbox, releases due timers,
// consults the budgets, serves reschedule requests, acts on a lowering,
// picks, publishes and migrates: about 480 instructions when none of it
// has anything to do, which is what a worker finds between two tasks of
// one burst (callgrind, a chain of asio::defer links on one worker: 998
// instructions per link in worker::loop, 481 of them the step; with the
// quick pick 861 and 321). The kernel's schedule() has the same fixed cost at
// every switch; a user-space runtime need not pay it when nothing it
// decides on has changed since the last step. So, after a task returns,
// the worker first asks whether the task a full step would pick is simply
// the run queue's head, with nothing else for the step to do; if so it
// takes that head (under its queue lock), publishes what changed, counts
// the scheduling point and pushes as the full step would, and runs it.
//
// It may (allows()) when, looked at under the worker's queue lock:
//   - the task that just ran had a level (`ran` >= 0) and the run queue's
//     top is that level: the next task is at the same priority, so the
//     worker's published level does not change (no raise to publish, no
//     lowering for the balancer to act on), and no move took its top away
//     since the last step (`lowered`);
//   - the inbox holds nothing above it, pending or half walked: a full
//     step's take would then add nodes behind the run queue's own at that
//     level or below, never ahead of its head (every node queued at a
//     level was pushed before every node still in the inbox at that level:
//     inbox.hpp and worker::submit_local), so the pick is the same; the
//     take is only put off;
//   - no timer is queued or on its way (a release could be due), no FIFO
//     budget would look at this pick (bandwidth::must_look, no group
//     budgets) or holds FIFO work, no new budget parameters wait, no
//     reschedule request is pending above the level, no token hop waits
//     and no discard was put off.
// And at most `max_streak` times in a row: then a full step runs, so that
// what a quick pick only puts off (the inbox's take at and below the level,
// which makes those nodes pushable; the clear of this worker's own
// reschedule byte) waits for at most that many tasks.
//
// What the quick pick does not skip: the QSBR quiescent state, the
// stranded watch's point count, the concurrency ID's switch hook, the
// overload mask's update when the pushable top changed, and the push the
// step would make after its pick (balancer::push_due).
//
// Concurrency: none; one per worker, owner only.
#pragma once

namespace urt::detail {

class quick_pick {
 public:
  /// Full steps are taken at least this often: after this many quick picks
  /// in a row, the next pick is a full step's.
  static constexpr unsigned max_streak = 16;

  /// What the worker sees after a task returned (under its queue lock).
  struct view {
    int ran = -1;                 ///< the level of the task that just ran; -1: none
    int queue_top = -1;           ///< the run queue's most urgent level; -1: empty
    int inbox_top = -1;           ///< the inbox's most urgent pending level; -1: none
    int inbox_walking = -1;       ///< the inbox's half-walked level (inbox::walking_level)
    bool lowered = false;         ///< a move took the queue's top away since the last step
    bool fifo_held = false;       ///< the FIFO budget holds work back here
    bool budgets_look = false;    ///< a budget would look at this pick
    bool params_changed = false;  ///< new bandwidth parameters wait to be taken up
    bool timers = false;          ///< a timed node is queued or on its way
    bool resched_above = false;   ///< a reschedule request above `ran` is pending
    bool hop_pending = false;     ///< a push-token hop waits to be served
    bool put_off = false;         ///< discards were put off after the lock
  };

  /// Whether the next task may be the run queue's head without a full step.
  [[nodiscard]] static bool allows(const view& v) noexcept {
    return v.ran >= 0 && v.queue_top == v.ran && v.inbox_top <= v.ran && v.inbox_walking <= v.ran &&
           !v.lowered && !v.fifo_held && !v.budgets_look && !v.params_changed && !v.timers &&
           !v.resched_above && !v.hop_pending && !v.put_off;
  }

  /// Whether a quick pick may be tried now (the streak is not at its end).
  [[nodiscard]] bool may_try() const noexcept { return streak_ < max_streak; }
  /// A quick pick was taken.
  void taken() noexcept { ++streak_; }
  /// A full step ran: the streak starts again.
  void full_step() noexcept { streak_ = 0; }
  [[nodiscard]] unsigned streak() const noexcept { return streak_; }

 private:
  unsigned streak_ = 0;
};

}  // namespace urt::detail
