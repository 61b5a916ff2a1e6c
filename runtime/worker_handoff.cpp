// How tasks reach a worker's run queue (worker.hpp has the class): a spawn
// from another thread into its inbox, with the doorbell, the stranded mark
// and a reschedule request when it will be late to it; a spawn from one of
// its own tasks, straight into the run queue; the owner's drain of its
// inbox at each scheduling point; a take-in by a peer for it (the stranded
// watch, a reschedule request); and the requests this worker serves for
// others. DESIGN.md, "How work travels", tells the whole path.
#include "worker.hpp"

#include <optional>

#include "hot.hpp"
#include "migrator.hpp"

namespace urt::detail {

URT_HOT bool worker::submit_remote(task_node* node, bool off_cpu) noexcept {
  // Read before the push: once pushed, the node may run and be freed.
  const int priority = node->timed ? cpupri::level_idle : node->priority;
  const bool movable = node->migratable;
  inbox_.push(node);
  // A full ring(), fence included: the owner may park between its last
  // look at the level bits and this push's bit, so the push must be
  // ordered before the load of the parking flag.
  const bool rang = parker_.ring();
  // Not parked: it takes the node in at its next scheduling point, unless
  // its task never reaches one; mark it for the idle workers' watch. After
  // the ring: its fence orders the push before the mark's load
  // (stranded.hpp).
  if (!rang) shared_.strand->mark(id_);
  // Ask whichever worker steps below the node first to run it when this
  // one will be late to it: busy at a less urgent level (the kernel would
  // preempt its task), parked or being woken, or awake but off its CPU
  // while the caller runs there (resched.hpp). Not for a node only this
  // worker may run. The request's release CAS comes after the push.
  if (movable && priority > priority_normal &&
      resched_requests::wanted(priority, shared_.prio_map->level(id_),
                               rang || off_cpu || parker_.parking())) {
    shared_.resched->request(id_, priority);
  }
  return rang;
}

URT_HOT void worker::serve_resched(int level) noexcept {
  resched_requests& requests = *shared_.resched;
  if (!requests.pending_above(level) || !balancer_.acts_on_lowering()) return;
  const unsigned w = requests.claim_above(level, id_);
  if (w == resched_requests::none) return;
  worker_counters::bump_relaxed(counters_.resched_claims);
  q_.lock.unlock();
  // Into w's run queue, where a pull sees it; then the pull, which moves
  // w's most urgent pushable task here if it is more urgent than this
  // worker's level (one pinned to w stays for w). Only the levels above
  // `level`: nothing at or below it could be pulled, and each node moved
  // is a miss on a line its spawner wrote (a claim behind a burst of
  // 100 took the whole burst in, 9-12 us, before the pull); w takes the
  // rest in itself.
  shared_.strand_peers->take_in(w, level);
  // w was late to its urgent task (busy below it, rung, or off its CPU):
  // until its next scheduling point it pushes nothing, so the rest of a
  // burst left there is pulled at each lowering, not a hop timeout later.
  balancer_.note_stuck(w);
  balancer_.pull_from(w);
  q_.lock.lock();
}

std::size_t worker::take_in_for_peer(int above) noexcept {
  q_.lock_remote();
  std::size_t moved = 0;
  // Relaxed: a stale state moves nodes that stop() will drain or cancel
  // from the run queue as it would from the inbox.
  if (q_.running != cpupri::level_invalid &&
      shared_.state.load(std::memory_order_relaxed) == run_state::running) {
    // FIFO within a level is kept: the nodes go to the tails of their
    // levels, behind what the owner took in before.
    moved = inbox_.take_untimed(above, [this](task_node* node) { q_.enqueue(node, id_); });
    if (moved > 0) {
      shared_.migrate->publish(id_);
      q_.moved_in.store(true, std::memory_order_relaxed);  // the owner looks at its next step
    }
  }
  q_.lock.unlock();
  // The owner may be on its way to park: its last look at the inbox can
  // find it emptied here before it sees moved_in, and it would then sleep
  // with these tasks in its run queue. The ring's seq_cst fence orders the
  // moved_in store before its load of the doorbell word (the Dekker pair
  // with the parker's announcement, memory-order row 10), as for a push.
  if (moved > 0) parker_.ring();
  return moved;
}

URT_HOT void worker::submit_local(task_node* node, local_spawn how) noexcept {
  q_.lock.lock();
  if (node->timed && inbox_.timed_pending()) {
    // A timed spawn while remote timed ones may be on their way: those whose
    // spawn returned before this call are due no later than anything this
    // call releases (enqueue()), so everything is taken in first. After
    // the call's clock read (commit_timed()): a node counted by then is
    // seen here.
    drain_all(node->called_at);
  } else {
    // FIFO within a priority across remote and local spawns: remote spawns
    // of this level that returned before this one go first (inbox.hpp).
    inbox_.take_level_all(node->priority, [this](task_node* n) { enqueue(n, horizon_); });
  }
  // Not timed: no release is due. Timed: no timed spawn that returned
  // before its call is still in the inbox (taken above, or none counted).
  enqueue(node, node->timed ? node->called_at : horizon_);
  shared_.migrate->publish(id_);  // a more urgent child raises this worker at once
  const std::optional<std::uint64_t> push =
      how == local_spawn::push ? balancer_.push_due() : std::nullopt;
  q_.lock.unlock();
  // The running task goes on, so the new one does not run next: push it
  // (or a more urgent queued one) to a lower worker if there is one. A
  // continuation stays: the running task is about to return, and the step
  // after it pushes what is still queued then.
  if (push) balancer_.push_tasks(*push);
}

void worker::uncount_local_accept() noexcept {
  // Single writer, like bump_release(); release for the same pairing.
  counters_.accepted_local.store(counters_.accepted_local.load(std::memory_order_relaxed) - 1,
                                 std::memory_order_release);
}

URT_HOT std::size_t worker::drain_inbox(clock::time_point horizon) noexcept {
  // Before the take: what a request was about is taken in now, or a
  // request raised after this stays for a claimer (resched.hpp).
  shared_.resched->clear(id_);
  // A few nodes per scheduling point, most urgent first, the levels above
  // the queue's top before the pick needs them (inbox.hpp). Relaxed: a
  // stale `running` costs one more step.
  const bool running = shared_.state.load(std::memory_order_relaxed) == run_state::running;
  // No timed node counted (after the horizon was read): every timed spawn
  // that returned before the horizon is in the timer queue already, and the
  // nodes this take meets were pushed after it.
  if (running && !inbox_.timed_pending()) {
    horizon_ = horizon;
    return inbox_.take([this] { return q_.rq.top_level(); }, inbox::batch, inbox::trickle,
                       inbox::reverse, [this](task_node* node) { enqueue(node, horizon_); });
  }
  // All of it once stop() began, so a stop does not wait on batches; and
  // while timed nodes are on their way (drain_all()).
  return drain_all(horizon);
}

std::size_t worker::drain_all(clock::time_point horizon) noexcept {
  // Everything, staged on the nodes' inbox links (the inbox is done with
  // them), then in two passes: first the nodes that wait for a deadline
  // still ahead at their call, into the timer queue; then the others in
  // the order taken. A spawn_at() already past at its call releases the
  // timer queue's nodes due by then ahead of itself (enqueue()): with the
  // first pass, a node due earlier that was still in the inbox is among
  // them. Otherwise it would queue behind a later deadline (a node behind
  // the past one in the take: a less urgent level, or later in its own).
  horizon_ = horizon;
  task_node* staged = nullptr;
  task_node** tail = &staged;
  const std::size_t taken = inbox_.take([this] { return q_.rq.top_level(); }, inbox::unlimited,
                                        inbox::unlimited, inbox::unlimited,
                                        [&tail](task_node* node) {
                                          *tail = node;
                                          tail = &node->inbox_next;
                                        });
  *tail = nullptr;
  for (task_node** link = &staged; task_node* node = *link;) {
    if (node->timed && node->release > node->called_at) {
      *link = node->inbox_next;
      enqueue(node, horizon);
    } else {
      link = &node->inbox_next;
    }
  }
  while (task_node* node = staged) {
    staged = node->inbox_next;
    enqueue(node, horizon);
  }
  return taken;
}

}  // namespace urt::detail
