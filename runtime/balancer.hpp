// balancer: a worker's migration policy (runtime_options::migration): when
// to push its queued tasks to lower workers, what to do on lowering (pull,
// or ask for a push through the push token), serving and forwarding token
// hops, and the stuck-hop fallback. The moves themselves are the migrator's;
// the balancer decides when to make them. It does not ring doorbells itself
// but tells `peer_bells` whom to ring, so a unit test can drive it on a
// synthetic topology and record the rings.
//
// Concurrency: one balancer per worker; every member except accept_hop()
// runs on its worker's thread. accept_hop() runs on the thread of whichever
// worker sends a token hop here, concurrently with everything. push_due()
// needs the worker's queue lock held; every other member takes the locks
// it needs through the migrator and must be called without it.
// Progress: push_tasks() is bounded by the worker count (each success fills
// a strictly lower worker); on_lowering(wait) spins at most ipi_timeout
// plus max_fallback_pulls pulls.
//
// A stuck worker stays stuck until its next scheduling point: once this
// worker has found one (it kept a token hop past ipi_timeout, an idle
// watcher took its inbox in, or this worker claimed a reschedule request
// for it, which means it was late to an urgent task: note_stuck()), it
// pulls from it at once, at a lowering or before parking, for as long as
// that worker's scheduling point count (stranded_marks::points) has not
// moved, instead of waiting ipi_timeout for a push it cannot make. The
// count is read relaxed: a stale value only makes one pull wait, or one
// pull come from a worker that has just resumed, as any pull may.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "overload.hpp"
#include "urt/options.hpp"
#include "urt/timer.hpp"

namespace urt::detail {

class cpupri;
class migrator;
class resched_requests;
class stranded_marks;
struct rt_queue;
struct worker_counters;

/// Whom a balancer rings: the runtime implements it over its workers'
/// doorbells, a unit test with a recorder.
class peer_bells {
 public:
  virtual ~peer_bells() = default;
  /// Wakes `worker` if it is parking; true when it wrote the doorbell.
  virtual bool ring(unsigned worker) noexcept = 0;
  /// Asks `worker` to serve token hop `seq` (balancer::accept_hop) and rings
  /// it; true when it wrote the doorbell.
  virtual bool hand_token(unsigned worker, std::uint64_t seq) noexcept = 0;
};

class balancer {
 public:
  /// The options the balancer follows.
  struct config {
    migration_mode mode = migration_mode::push_ipi;
    std::chrono::nanoseconds ipi_timeout{0};
    static config from(const runtime_options& o) noexcept { return {o.migration, o.ipi_timeout}; }
  };
  /// The shared structures of one runtime that every balancer works on.
  struct shared_parts {
    migrator& migrate;
    const cpupri& prio;
    const overload_mask& overload;
    push_token& token;
    peer_bells& bells;
    resched_requests& resched;
    const stranded_marks& progress;  // each worker's scheduling point count
    unsigned workers;                // the number of workers: bounds a push loop
  };

  balancer(unsigned self, config cfg, shared_parts parts, rt_queue& q,
           worker_counters& counters) noexcept
      : self_(self), cfg_(cfg), parts_(parts), q_(q), counters_(counters) {}

  /// Whether lowering triggers migration at all (mode != none).
  [[nodiscard]] bool acts_on_lowering() const noexcept { return cfg_.mode != migration_mode::none; }

  /// Under the queue lock: when overloaded and a push could succeed where
  /// the last one failed, the q.top_changes to hand to push_tasks().
  [[nodiscard]] std::optional<std::uint64_t> push_due() const noexcept;
  /// No lock held: push while it makes progress (push_rt_tasks), ringing
  /// each worker a task went to. `top_changes`: q.top_changes when the
  /// caller saw the queue; a failed push records it, and push_due() skips
  /// pushes until it moves.
  void push_tasks(std::uint64_t top_changes) noexcept;

  /// After a lowering the worker has published: the fence of the lowering
  /// Dekker pair, then whether any worker is overloaded.
  [[nodiscard]] bool overload_seen_after_lowering() const noexcept;
  /// Whether on_lowering() waits for the push before the worker commits to
  /// a task.
  enum class wait_for_push : bool { no, yes };
  /// No lock held, after lowering with overloaded workers about: pull (pull
  /// mode) or ask for a push (push_ipi); with wait::yes, also wait for the
  /// push up to ipi_timeout, then pull it (the stuck-worker fallback).
  void on_lowering(wait_for_push wait) noexcept;

  /// Any thread holding the push token: asks this worker to serve hop
  /// `seq` at its next scheduling point. The caller then rings the worker.
  void accept_hop(std::uint64_t seq) noexcept {
    // Release: pairs with the acquire exchange in serve_token().
    hop_seq_.store(seq, std::memory_order_release);
  }
  /// Whether a hop waits to be served (relaxed: it only decides whether the
  /// worker looks; serve_token() acquires).
  [[nodiscard]] bool hop_pending() const noexcept {
    return hop_seq_.load(std::memory_order_relaxed) != 0;
  }
  /// No lock held, at each scheduling point: serves a pending token hop
  /// (push, then send the token on).
  void serve_token() noexcept;

  /// No lock held: one pull from `source`, counted as a pull (an idle
  /// worker after taking a stuck worker's inbox in: stranded.hpp). True
  /// when it moved a task here.
  bool pull_from(unsigned source) noexcept { return pull_one(source); }

  /// No lock held: `w` was found stuck (an idle watcher took its inbox in
  /// for it: stranded.hpp) or late (this worker claimed a reschedule
  /// request for it: resched.hpp). Until `w` takes a scheduling point,
  /// this worker pulls from it without waiting for its push (see the top).
  void note_stuck(unsigned w) noexcept;

  /// What an idle worker does about migration before it parks.
  struct idle_plan {
    bool pulled = false;  // it took over a stuck hop and pulled: look again instead of parking
    clock::time_point token_check = clock::time_point::max();  // wake then to check the token
  };
  /// No lock held, when the worker finds nothing to run: under push_ipi, an
  /// idle worker is the one that benefits from migration, so it watches the
  /// travelling token: it takes over a hop pending past ipi_timeout (and
  /// pulls once from the stuck worker), or returns when to look again.
  idle_plan before_idle() noexcept;

 private:
  // Takes over a token hop pending past ipi_timeout and sends it on;
  // returns the worker that kept it, or none.
  unsigned take_over_stuck_token() noexcept;
  // One pull from `source` (the fallback), counted; true when it moved a task.
  bool pull_one(unsigned source) noexcept;
  // Whether `w` is the worker last found stuck and has taken no scheduling
  // point since.
  [[nodiscard]] bool still_stuck(unsigned w) const noexcept;
  void send_hop(push_token::hop h) noexcept;
  bool ring(unsigned target) noexcept;  // true when it wrote the doorbell

  const unsigned self_;
  const config cfg_;
  const shared_parts parts_;
  rt_queue& q_;
  worker_counters& counters_;
  unsigned rotation_ = 0;  // spreads this worker's pushes over equal targets
  std::uint64_t push_failed_at_ = ~std::uint64_t{0};  // q_.top_changes at the last failed push
  unsigned stuck_ = push_token::none;                 // the worker last found stuck (note_stuck)
  std::uint64_t stuck_points_ = 0;                    // its scheduling point count then
  // The token hop this worker is asked to serve (0: none); written by the
  // worker that sends the hop, exchanged by the owner: a line of its own.
  alignas(64) std::atomic<std::uint64_t> hop_seq_{0};
};

}  // namespace urt::detail
