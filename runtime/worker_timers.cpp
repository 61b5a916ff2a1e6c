// The worker's timed releases: due releases into the run queue, the next
// release of a periodic series, and the end of every series once stop()
// begins (worker.hpp has the class; owner only, like the timer queue).
#include "worker.hpp"

#include "clock_now.hpp"
#include "hot.hpp"

namespace urt::detail {

URT_HOT clock::time_point worker::release_horizon() const noexcept {
  // A timed spawn increments the hint before its push, so a node whose
  // spawn returned before this read is counted, or taken already.
  return timers_.empty() && !inbox_.timed_pending() ? clock::time_point::min() : clock_now();
}

URT_HOT void worker::release_due(clock::time_point horizon) noexcept {
  while (task_node* next = timers_.top()) {
    if (next->release > horizon) break;
    timers_.pop();
    release(next);
  }
}

void worker::release(task_node* node) noexcept {
  // A cancelled series ends at its next release instead of running.
  // Acquire: pairs with the release store in periodic_task::cancel().
  if (node->series() != nullptr && node->series()->cancelled.load(std::memory_order_acquire)) {
    discard_unlocked(node, false);
    return;
  }
  q_.enqueue(node, id_);
}

void worker::end_periodic_series() noexcept {
  // Once stop() has begun, no periodic series starts another release: the
  // series is one task, finished (drain) or dropped (cancel) now.
  series_ended_ = true;
  const bool cancelled = shared_.state.load(std::memory_order_relaxed) == run_state::cancelling;
  timers_.remove_if_not([](task_node* n) { return n->series() == nullptr; },
                        [&](task_node* n) { discard_unlocked(n, cancelled); });
}

void worker::rearm_series(task_node* node, periodic_state& series) noexcept {
  // Release k + 1 is start + (k + 1) * period: drift-free. After an
  // overrun the next releases are already due: catch_up runs them,
  // skip moves on to the first one not yet past (still on the grid).
  // Relaxed state: a stale "running" only re-arms once more, and the
  // series ends at its next release. Acquire: as in release_due(). A
  // release past the clock's range saturates at max(), which never comes
  // (the timer queue keeps it last, the parker sets no alarm for it): such
  // a series waits for stop().
  if (shared_.state.load(std::memory_order_relaxed) == run_state::running &&
      !series.cancelled.load(std::memory_order_acquire)) {
    node->release = saturating_add(node->release, node->period);
    if (series.overrun == overrun_policy::skip) {
      const clock::time_point now = clock_now();
      if (node->release < now) {
        // In unsigned arithmetic, where now - release is exact for any
        // start (time_point::min() included): the releases in [release,
        // now) are skipped, the next is the first grid point at or after
        // now, now + (period - gap % period) % period.
        const std::uint64_t gap =
            static_cast<std::uint64_t>(now.time_since_epoch().count()) -
            static_cast<std::uint64_t>(node->release.time_since_epoch().count());
        const auto period = static_cast<std::uint64_t>(node->period.count());
        const std::uint64_t rest = gap % period;
        const std::uint64_t missed = gap / period + (rest != 0 ? 1 : 0);
        node->release = saturating_add(
            now, clock::duration{static_cast<clock::rep>(rest != 0 ? period - rest : 0)});
        series.skipped.store(series.skipped.load(std::memory_order_relaxed) + missed,
                             std::memory_order_relaxed);
      }
    }
    timers_.push(node);
    return;
  }
  discard(node, counters_.completed);
}

}  // namespace urt::detail
