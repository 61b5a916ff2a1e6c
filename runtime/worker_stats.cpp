// What others read of a worker's counters (worker.hpp has the class): its
// load for placement, the counts stop() waits on for quiescence, and its
// worker_stats and per-group stats. Any thread; relaxed snapshots except
// where a load names the store it pairs with.
#include "worker.hpp"

namespace urt::detail {

std::uint64_t worker::load() const noexcept {
  // The hint is read last and may be ahead of the acceptances read first
  // (tasks accepted and finished in between): clamp instead of wrapping.
  // Tasks moved away count as finished here, tasks moved in as accepted.
  const std::uint64_t accepted = counters_.accepted_remote.load(std::memory_order_relaxed) +
                                 counters_.accepted_local.load(std::memory_order_relaxed) +
                                 q_.migrated_in.load(std::memory_order_relaxed);
  const std::uint64_t finished = counters_.finished_hint.load(std::memory_order_relaxed) +
                                 q_.migrated_out.load(std::memory_order_relaxed);
  return accepted > finished ? accepted - finished : 0;
}

std::uint64_t worker::finished_acquire() const noexcept {
  // Acquire: pairs with the release bumps of completed and cancelled.
  return counters_.completed.load(std::memory_order_acquire) +
         counters_.cancelled.load(std::memory_order_acquire);
}

std::uint64_t worker::accepted_seq_cst() const noexcept {
  return counters_.accepted_remote.load(std::memory_order_seq_cst) +
         counters_.accepted_local.load(std::memory_order_seq_cst);
}

worker_stats worker::stats() const noexcept {
  const worker_counters& c = counters_;
  const auto get = [](const std::atomic<std::uint64_t>& v) {
    return v.load(std::memory_order_relaxed);  // a snapshot of statistics
  };
  worker_stats s;
  s.worker = id_;
  s.pu = shared_.topo->workers()[id_].pu;
  s.accepted = get(c.accepted_remote) + get(c.accepted_local);
  s.completed = get(c.completed);
  s.cancelled = get(c.cancelled);
  s.exceptions = get(c.exceptions);
  s.parks = get(c.parks);
  s.doorbells = parker_.rings_received();
  s.doorbells_sent = get(c.doorbells_sent);
  s.pushes = get(c.pushes);
  s.pulls = get(c.pulls);
  s.token_hops = get(c.token_hops);
  s.fallbacks = get(c.fallbacks);
  s.take_overs = get(c.take_overs);
  s.stuck_pulls = get(c.stuck_pulls);
  s.resched_claims = get(c.resched_claims);
  s.quick_picks = get(c.quick_picks);
  s.wake_yields = get(c.wake_yields);
  s.migrated_in = get(q_.migrated_in);
  s.migrated_out = get(q_.migrated_out);
  s.remote_locks = get(q_.remote_locks);
  s.io_polls = io_poll_.polls();
  s.io_handlers = io_poll_.handlers();
  s.io_rescued = get(c.io_rescued);
  s.io_ring_skips = io_poll_.ring_skips();
  s.io_ring_error = io_poll_.ring_error();
  s.timer_spin_ns = get(c.timer_spin_ns);
  s.idle_spin_ns = static_cast<std::uint64_t>(parker_.reported_idle_spin().count());
  s.timer_advance_ns = static_cast<std::uint64_t>(parker_.reported_timer_advance().count());
  const bandwidth::counters& b = bandwidth_.stats();
  s.fifo_ns = get(b.fifo_ns);
  s.normal_ns = get(b.normal_ns);
  s.idle_ns = get(b.idle_ns);
  s.throttle_events = get(b.throttle_events);
  s.throttled_ns = get(b.throttled_ns);
  s.server_slices = get(b.server_slices);
  s.overrun_ns = get(b.overrun_ns);
  s.overrun_events = get(b.overrun_events);
  return s;
}

void worker::add_group_stats(unsigned g, group_stats& out) const noexcept {
  const bandwidth::counters* c = groups_.counters(g);
  if (c == nullptr) return;
  out.fifo_ns += c->fifo_ns.load(std::memory_order_relaxed);
  out.normal_ns += c->normal_ns.load(std::memory_order_relaxed);
  out.throttle_events += c->throttle_events.load(std::memory_order_relaxed);
  out.throttled_ns += c->throttled_ns.load(std::memory_order_relaxed);
  out.server_slices += c->server_slices.load(std::memory_order_relaxed);
  out.overrun_ns += c->overrun_ns.load(std::memory_order_relaxed);
  out.overrun_events += c->overrun_events.load(std::memory_order_relaxed);
}

}  // namespace urt::detail
