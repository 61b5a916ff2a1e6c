#include "balancer.hpp"

#include <limits>

#include "clock_now.hpp"
#include "cpupri.hpp"
#include "hot.hpp"
#include "migrator.hpp"
#include "resched.hpp"
#include "rt_queue.hpp"
#include "spinlock.hpp"
#include "stranded.hpp"
#include "worker_counters.hpp"

namespace urt::detail {
namespace {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_now().time_since_epoch())
      .count();
}

}  // namespace

URT_HOT std::optional<std::uint64_t> balancer::push_due() const noexcept {
  // The kernel pushes at every schedule while overloaded. A failed push
  // stays failed until this worker's most urgent pushable task changes or
  // another worker lowers its priority; under push_ipi and pull such a
  // worker acts itself (it saw this worker in the overload count, which
  // stayed non-zero since the failure: a request reaches us as a token
  // hop, or it pulls). So the push is retried only once the top changed:
  // a worker draining a batch of equal tasks while every other worker is
  // as busy does not search cpupri after each one. Under none, nobody
  // else acts, so every task switch pushes.
  if (q_.overloaded() &&
      (cfg_.mode == migration_mode::none || q_.top_changes != push_failed_at_)) {
    return q_.top_changes;
  }
  return std::nullopt;
}

URT_HOT void balancer::push_tasks(std::uint64_t top_changes) noexcept {
  // push_rt_tasks: while a push succeeds. Each success fills a worker that
  // was strictly lower, so the worker count bounds the loop.
  for (unsigned i = 0; i < parts_.workers; ++i) {
    const migrator::pushed p = parts_.migrate.push_one(self_, rotation_++);
    if (p.target == migrator::none) {
      if (i == 0) push_failed_at_ = top_changes;
      return;
    }
    worker_counters::bump_relaxed(counters_.pushes);
    const bool rang = ring(p.target);
    // The target runs a task below the pushed one, or must first be woken:
    // whichever worker steps below it first runs it, as for a spawn into
    // an inbox (resched.hpp). Only migratable tasks are pushed, so some
    // other worker may run it. After the move and the ring: a claimer's
    // acquire CAS then sees the task in the target's run queue.
    if (resched_requests::wanted(p.priority, p.target_running, rang)) {
      parts_.resched.request(p.target, p.priority);
    }
  }
}

URT_HOT bool balancer::overload_seen_after_lowering() const noexcept {
  // Pairs with the seq_cst RMW or fence in overload_mask::set() (a Dekker
  // pair): our lowered level, stored by publish() (ours, or the mover's
  // under our lock, which we hold or have held since), is ordered before
  // the load of the overload mask, and a worker publishing a pushable task
  // orders that before its cpupri reads; so either it sees us lower and
  // pushes, or we see it overloaded here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return parts_.overload.any();
}

URT_HOT void balancer::on_lowering(wait_for_push wait) noexcept {
  const overload_mask& overload = parts_.overload;
  if (cfg_.mode == migration_mode::pull) {
    // pull_rt_task: take what every overloaded worker queues above us.
    worker_counters::bump_relaxed(counters_.pulls, parts_.migrate.pull_all(self_));
    return;
  }
  // push_ipi: ask the overloaded workers to push (tell_cpu_to_push).
  send_hop(parts_.token.request(self_, overload, now_ns()));
  if (wait == wait_for_push::no) return;  // a pushed task shows at the next scheduling point
  if (parts_.prio.level(self_) == cpupri::level_idle) return;  // the parker's wake-up watches
  // About to run a task at our level: while a more urgent one waits on an
  // overloaded worker, wait for the push before committing, for at most
  // ipi_timeout; then pull it (the stuck-worker fallback). A failed pull
  // (the task left meanwhile, or may not run here) looks again, at most
  // max_fallback_pulls times, then the worker goes on with its own task.
  // A source already found stuck, with no scheduling point since, would
  // not answer this hop either: it is pulled from at once.
  constexpr int max_fallback_pulls = 3;
  const clock::time_point deadline = clock_now() + cfg_.ipi_timeout;
  int pulls_tried = 0;
  for (unsigned spins = 0;; ++spins) {
    serve_token();  // we may be overloaded too: never sit on a hop
    // Our level rises when a task is pushed in; one pushed in is not yet a
    // reason to stop looking: a still more urgent one may wait elsewhere.
    const int level = parts_.prio.level(self_);
    const unsigned source = overload.best_above(level, self_);
    if (source == overload_mask::none) return;  // pushed here or elsewhere, or run there
    const bool known_stuck = still_stuck(source);
    if (!known_stuck && spins % 16 != 15) {
      cpu_relax();
      continue;
    }
    if (known_stuck || clock_now() >= deadline) {
      if (pulls_tried == 0 && !known_stuck) {
        worker_counters::bump_relaxed(counters_.fallbacks);
        take_over_stuck_token();
      }
      if (pull_one(source)) {
        if (known_stuck) worker_counters::bump_relaxed(counters_.stuck_pulls);
        return;
      }
      if (++pulls_tried == max_fallback_pulls) return;
      continue;
    }
    // No sched_yield() here, though the source may share our CPU: the OS
    // hands a yielded CPU to whichever thread waits for it, for a whole
    // slice (milliseconds), and a thread of the application spinning
    // beside the workers took it: with one such thread on two CPUs, drains
    // that take 5-20 ms without the yield took up to 3 s with it, in a
    // fallback per lowering (bench/README.md, "A lowering worker's yield").
    // The wait is bounded by ipi_timeout, then the fallback pulls.
  }
}

URT_HOT void balancer::serve_token() noexcept {
  // Relaxed first look: the common case (no hop) costs no RMW.
  if (hop_seq_.load(std::memory_order_relaxed) == 0) return;
  // Acquire: pairs with the release store in accept_hop().
  const std::uint64_t seq = hop_seq_.exchange(0, std::memory_order_acquire);
  if (seq == 0) return;
  push_tasks(push_failed_at_);  // always try: a worker lowered and asked
  send_hop(parts_.token.forward(self_, seq, parts_.overload, now_ns()));
}

URT_HOT balancer::idle_plan balancer::before_idle() noexcept {
  idle_plan plan;
  if (cfg_.mode != migration_mode::push_ipi || !parts_.overload.any()) return plan;
  // A worker found stuck before, with no scheduling point since, that
  // queues a task we could run: pull it now, not a hop timeout later.
  // Looked at first (two loads), so the mask's scan is made only while one
  // is noted.
  if (stuck_ != push_token::none && still_stuck(stuck_) &&
      parts_.overload.best_above(cpupri::level_idle, self_) == stuck_ && pull_one(stuck_)) {
    worker_counters::bump_relaxed(counters_.stuck_pulls);
    plan.pulled = true;
    return plan;
  }
  if (const unsigned stuck = take_over_stuck_token(); stuck != push_token::none) {
    // The fallback: one pull from the worker that kept the token.
    worker_counters::bump_relaxed(counters_.fallbacks);
    pull_one(stuck);
    plan.pulled = true;
    return plan;
  }
  const std::int64_t due_ns = parts_.token.hop_deadline(cfg_.ipi_timeout.count());
  if (due_ns != std::numeric_limits<std::int64_t>::max() && parts_.token.holder() != self_) {
    plan.token_check = clock::time_point(std::chrono::nanoseconds(due_ns));
  }
  return plan;
}

bool balancer::pull_one(unsigned source) noexcept {
  if (!parts_.migrate.pull_from(self_, source)) return false;
  worker_counters::bump_relaxed(counters_.pulls);
  return true;
}

void balancer::note_stuck(unsigned w) noexcept {
  stuck_ = w;
  stuck_points_ = parts_.progress.points(w);
}

bool balancer::still_stuck(unsigned w) const noexcept {
  return w == stuck_ && parts_.progress.points(w) == stuck_points_;
}

unsigned balancer::take_over_stuck_token() noexcept {
  push_token& token = parts_.token;
  if (cfg_.mode != migration_mode::push_ipi || !token.travelling()) return push_token::none;
  const push_token::takeover t =
      token.take_over_stuck(self_, parts_.overload, now_ns(), cfg_.ipi_timeout.count());
  send_hop(t.next);
  if (t.stuck != push_token::none) note_stuck(t.stuck);
  return t.stuck;
}

void balancer::send_hop(push_token::hop h) noexcept {
  if (h.target == push_token::none) return;
  worker_counters::bump_relaxed(counters_.token_hops);
  if (parts_.bells.hand_token(h.target, h.seq)) worker_counters::bump_relaxed(counters_.doorbells_sent);
}

bool balancer::ring(unsigned target) noexcept {
  if (!parts_.bells.ring(target)) return false;
  worker_counters::bump_relaxed(counters_.doorbells_sent);
  return true;
}

}  // namespace urt::detail
