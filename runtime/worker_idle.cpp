// A worker with nothing to run (worker.hpp has the class; owner only):
// what it does before it parks (the pull, the watches of stuck peers'
// inboxes and reactors), what ends its wait, and the wait itself, offline
// for QSBR.
#include "worker.hpp"

#include <algorithm>
#include <exception>

#include "bandwidth_table.hpp"
#include "clock_now.hpp"
#include "hot.hpp"
#include "qsbr.hpp"

namespace urt::detail {

bool worker::work_pending() const noexcept {
  // Relaxed flags: they only decide to take the lock and look (moved_in),
  // or to exchange the hop.
  return inbox_.pending() || q_.moved_in.load(std::memory_order_relaxed) || balancer_.hop_pending();
}

URT_HOT void worker::idle(run_state seen) {
  publish_load_hint();
  if (seen != run_state::running) {
    // Tell stop() to look again: this worker has nothing left to run now.
    // Release: pairs with the acquire load in wait_quiescent(), which then
    // sees this worker's finished counts.
    shared_.idle_epoch.fetch_add(1, std::memory_order_release);
    shared_.idle_epoch.notify_all();
  }
  const balancer::idle_plan plan = balancer_.before_idle();
  if (plan.pulled) return;  // look at what it pulled
  // A worker stuck in one task with remote spawns in its inbox: take them
  // into its run queue once it has reached no scheduling point for
  // ipi_timeout, and pull one (stranded.hpp). Not under none, where
  // nothing moves tasks between workers.
  clock::time_point strand_check = clock::time_point::max();
  if (balancer_.acts_on_lowering()) {
    const stranded_watch::plan watch = strand_watch_.before_idle(*shared_.strand, clock_now());
    if (watch.take_over != stranded_marks::none &&
        shared_.strand_peers->take_in(watch.take_over, cpupri::level_idle) > 0) {
      worker_counters::bump_relaxed(counters_.take_overs);
      balancer_.note_stuck(watch.take_over);             // its other tasks: pulled without a wait
      if (balancer_.pull_from(watch.take_over)) return;  // look at what it pulled
    }
    strand_check = watch.check;
  }
  // A worker with I/O outstanding that has not looked into its reactor for
  // too long (stuck in a task, or not given a CPU): poll it for it, and
  // look again soon while it stays so (io_rescue.hpp). Not once stop()
  // began, when completions are no longer delivered.
  clock::time_point io_check = clock::time_point::max();
  if (seen == run_state::running) {
    const io_watch::plan io = io_watch_.before_idle(*shared_.reactors, [] { return clock_now(); });
    if (io.rescue != io_watch::none) {
      const std::size_t ran = rescue_peer_io(io.rescue);
      const bool pulled = balancer_.acts_on_lowering() && balancer_.pull_from(io.rescue);
      if (ran > 0 || pulled) return;  // run what the completions spawned here, or the pulled task
    }
    io_check = io.check;
  }
  const task_node* first_timer = timers_.top();
  // The idle spin polls the reactor too (parked, the worker waits in it).
  // A completion taken in here spawns its handler on this worker outside a
  // task, which enqueues it straight into the run queue (submit_local):
  // work_pending() does not look there, so a poll that ran a handler ends
  // the idle spin by itself. Otherwise the worker parked with the task
  // queued and slept until something else woke it.
  // New bandwidth parameters (set_bandwidth() rings every worker after
  // publishing them) end the wait too: a worker holding FIFO work back
  // until its period ends must look at a lifted budget now.
  // A reschedule request raised while this worker spins or is about to park
  // ends the wait too, and the next step claims it (serve_resched): a
  // spawn that rings a parked peer raises one, and the OS may not run that
  // peer for milliseconds when its CPU is busy with another thread
  // (urt-peers (e)); this worker, awake, runs the task now. Only a request
  // the step before would have claimed (claim_level_): one it would not
  // would end the wait at once, again and again.
  const int claim_level = balancer_.acts_on_lowering() ? claim_level_ : priority_max;
  const auto work = [this, claim_level] {
    return poll_io() > 0 || work_pending() ||
           shared_.bandwidth_params->version() != bandwidth_version_ ||
           shared_.resched->pending_above(claim_level);
  };
  // Acquire: pairs with stop()'s store of the state.
  const auto state_changed = [&] { return shared_.state.load(std::memory_order_acquire) != seen; };
  const auto io_outstanding = [this] { return io_poll_.outstanding() > 0; };
  // Holding FIFO back with nothing else to run (strict): wake when the
  // period ends and FIFO may run again.
  clock::time_point wake_at = std::min({plan.token_check, strand_check, io_check});
  if (bandwidth_.active() && bandwidth_.holding())
    wake_at = std::min(wake_at, bandwidth_.period_end());
  // Held groups' tasks wait for their periods to end.
  if (groups_.any_held()) wake_at = std::min(wake_at, groups_.next_end());
  qsbr::offline();  // a parked online thread would stall every grace period
  try {
    const bool completions =
        parker_.idle(first_timer != nullptr ? first_timer->release : clock::time_point::max(),
                     wake_at, parker::wake_checks{work, state_changed, io_outstanding});
    if (completions) io_poll_.after_parked_completion();
  } catch (...) {
    // A completion's spawn failed (no memory): its handler is gone.
    handle_exception(std::current_exception());
  }
  qsbr::online();
}

}  // namespace urt::detail
