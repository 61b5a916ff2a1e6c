#include "worker.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
// TSAN cannot see liburcu's atomics: annotate the inbox hand-off.
#define URT_TSAN_RELEASE(p) __tsan_release(p)
#define URT_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define URT_TSAN_RELEASE(p) static_cast<void>(p)
#define URT_TSAN_ACQUIRE(p) static_cast<void>(p)
#endif

namespace urt::detail {
namespace {

thread_local worker* tls_worker = nullptr;
thread_local const void* tls_owner = nullptr;
thread_local task_node* tls_task = nullptr;

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
      .count();
}

}  // namespace

worker::worker(runtime_shared& shared, unsigned id) : shared_(shared), id_(id) {
  __cds_wfcq_init(&inbox_head_, &inbox_tail_);
  __cds_wfcq_init(&splice_head_, &splice_tail_);
}

worker::~worker() {
  if (thread_.joinable()) thread_.join();
}

void worker::start(startup& st) {
  thread_ = std::thread([this, &st] { main(st); });
}

void worker::join() {
  if (thread_.joinable()) thread_.join();
}

void worker::main(startup& st) {
  try {
    set_up();
  } catch (...) {
    {
      std::lock_guard lock(st.mutex);
      if (!st.error) st.error = std::current_exception();
    }
    st.done.count_down();
    return;
  }
  st.done.count_down();  // `st` may be gone after this
  tls_worker = this;
  tls_owner = shared_.owner;
  bell_.arm();
  q_.lock.lock();
  shared_.migrate->publish(id_);  // idle: routable from now on
  q_.lock.unlock();
  loop();
  bell_.disarm();
  alarm_.disarm();
  work_.reset();
  io_.poll();  // completes the cancelled wait so its handler memory is freed
  tls_worker = nullptr;
  tls_owner = nullptr;
}

void worker::set_up() {
  const std::string name = "urt-w" + std::to_string(id_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  shared_.topo->bind_current_thread(id_);
  if (shared_.policy == worker_policy::fifo) {
    sched_param param{};
    param.sched_priority = shared_.fifo_priority;
    if (const int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param); err != 0) {
      throw std::system_error(
          err, std::generic_category(),
          "runtime_options.policy: SCHED_FIFO at fifo_priority " +
              std::to_string(shared_.fifo_priority) + " refused for worker " + std::to_string(id_) +
              (err == EPERM ? " (needs root, CAP_SYS_NICE or a large enough RLIMIT_RTPRIO)" : ""));
    }
  }
}

void worker::loop() {
  for (;;) {
    // Acquire: pairs with the seq_cst store in stop(); a worker that sees
    // a new state sees everything stop() did before it.
    const run_state seen = shared_.state.load(std::memory_order_acquire);
    if (task_node* node = step(seen)) {
      run_task(node);
      continue;
    }
    if (seen == run_state::stopped) return close();
    idle(seen);
  }
}

task_node* worker::step(run_state seen) noexcept {
  migrator& m = *shared_.migrate;
  q_.lock.lock();
  const int before = q_.published;  // the level this worker showed until now
  q_.running = cpupri::level_idle;  // the previous task (if any) is done
  q_.moved_in.store(false, std::memory_order_relaxed);  // we look now
  drain_inbox();
  if (seen != run_state::running && !series_ended_) end_periodic_series();
  if (seen == run_state::cancelling) cancel_queued();
  release_due();
  // Lowering: since the last step (the previous task is done), or since a
  // move took our queued top away (rt_queue::lowered).
  const bool lowered = q_.current() < before || std::exchange(q_.lowered, false);
  if (lowered && shared_.migration != migration_mode::none) {
    // Show the level we would run at, and migrate before committing to a
    // task (a running task cannot be preempted by one that arrives a
    // moment later).
    m.publish(id_);
    if (overload_seen_after_lowering()) {
      q_.lock.unlock();
      migrate_on_lowering(wait_for_push::yes);
      q_.lock.lock();
    }
  }
  task_node* node = q_.pop();
  if (node != nullptr) {
    // Unlinking `node` pulled in the new head; start fetching the one
    // after it, so a long queue costs overlapping misses, not serial ones.
    if (const rq_link* head = q_.rq.peek(); head != nullptr) __builtin_prefetch(head->next, 1);
    q_.running = node->priority;
  }
  m.publish(id_);
  const std::optional<std::uint64_t> push = push_due();
  q_.lock.unlock();
  if (push) push_tasks(*push);  // after each task switch (push_rt_tasks)
  serve_token();
  return node;
}

bool worker::overload_seen_after_lowering() const noexcept {
  // Pairs with the seq_cst RMW or fence in overload_mask::set() (a Dekker
  // pair): our lowered level, stored by publish() (ours, or the mover's
  // under our lock, which we hold or have held since), is ordered before
  // the load of the overload mask, and a worker publishing a pushable task
  // orders that before its cpupri reads; so either it sees us lower and
  // pushes, or we see it overloaded here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return shared_.overload->any();
}

void worker::migrate_on_lowering(wait_for_push wait) noexcept {
  const overload_mask& overload = *shared_.overload;
  if (shared_.migration == migration_mode::pull) {
    // pull_rt_task: take what every overloaded worker queues above us.
    const unsigned pulled = shared_.migrate->pull_all(id_);
    pulls_.store(pulls_.load(std::memory_order_relaxed) + pulled, std::memory_order_relaxed);
    return;
  }
  // push_ipi: ask the overloaded workers to push (tell_cpu_to_push).
  send_hop(shared_.token->request(id_, overload, now_ns()));
  if (wait == wait_for_push::no) return;  // a pushed task shows at the next scheduling point
  if (shared_.prio_map->level(id_) == cpupri::level_idle) return;  // idle() watches
  // About to run a task at our level: while a more urgent one waits on an
  // overloaded worker, wait for the push before committing, for at most
  // ipi_timeout; then pull it (the stuck-worker fallback). A failed pull
  // (the task left meanwhile, or may not run here) looks again, at most
  // max_fallback_pulls times, then the worker goes on with its own task.
  constexpr int max_fallback_pulls = 3;
  const clock::time_point deadline = clock::now() + shared_.ipi_timeout;
  int pulls_tried = 0;
  for (unsigned spins = 0;; ++spins) {
    serve_token();  // we may be overloaded too: never sit on a hop
    // Our level rises when a task is pushed in; one pushed in is not yet a
    // reason to stop looking: a still more urgent one may wait elsewhere.
    const int level = shared_.prio_map->level(id_);
    const unsigned source = overload.best_above(level, id_);
    if (source == overload_mask::none) return;  // pushed here or elsewhere, or run there
    if (spins % 16 != 15) {
      cpu_relax();
      continue;
    }
    if (clock::now() >= deadline) {
      if (pulls_tried == 0) {
        bump(fallbacks_);
        take_over_stuck_token();
      }
      if (pull_one(source)) return;
      if (++pulls_tried == max_fallback_pulls) return;
      continue;
    }
    // The source may share our CPU (more workers than CPUs, or another
    // process there): let it run to its scheduling point.
    if (spins % 256 == 255) ::sched_yield();
  }
}

void worker::close() noexcept {
  q_.lock.lock();
  q_.running = cpupri::level_invalid;  // nothing may be moved in any more
  shared_.migrate->publish(id_);
  q_.lock.unlock();
}

void worker::enqueue(task_node* node) noexcept {
  if (node->timed) {
    timers_.push(node);
  } else {
    q_.enqueue(node, id_);
  }
}

bool worker::preempt_point() noexcept {
  q_.lock.lock();
  drain_inbox();
  release_due();
  shared_.migrate->publish(id_);
  // Between steps only a move out of our queue lowers us (rt_queue::lowered).
  const bool lowered =
      std::exchange(q_.lowered, false) && shared_.migration != migration_mode::none;
  bool urgent = q_.rq.top_level() > q_.running;
  const std::optional<std::uint64_t> push = push_due();
  q_.lock.unlock();
  if (push) push_tasks(*push);
  serve_token();
  // Lowered while running: pull what is now more urgent than the running
  // task, or ask for a push, without waiting for it (the task runs on).
  const bool pulled_or_asked = lowered && overload_seen_after_lowering();
  if (pulled_or_asked) migrate_on_lowering(wait_for_push::no);
  if ((urgent && push.has_value()) || pulled_or_asked) {
    // The urgent task may just have been pushed to a worker that runs it
    // now, or one more urgent than the running task pulled here.
    q_.lock.lock();
    urgent = q_.rq.top_level() > q_.running;
    q_.lock.unlock();
  }
  return urgent;
}

std::optional<std::uint64_t> worker::push_due() const noexcept {
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
      (shared_.migration == migration_mode::none || q_.top_changes != push_failed_at_)) {
    return q_.top_changes;
  }
  return std::nullopt;
}

void worker::push_tasks(std::uint64_t top_changes) noexcept {
  // push_rt_tasks: while a push succeeds. Each success fills a worker that
  // was strictly lower, so the worker count bounds the loop.
  for (std::size_t i = 0; i < shared_.peers.size(); ++i) {
    const unsigned target = shared_.migrate->push_one(id_, rotation_++);
    if (target == migrator::none) {
      if (i == 0) push_failed_at_ = top_changes;
      return;
    }
    bump(pushes_);
    ring_peer(target);
  }
}

void worker::ring_peer(unsigned target) noexcept {
  if (shared_.peers[target]->ring()) bump(doorbells_sent_);
}

bool worker::hand_token(std::uint64_t seq) noexcept {
  // Release: pairs with the acquire exchange in serve_token().
  token_seq_.store(seq, std::memory_order_release);
  return bell_.ring();
}

void worker::send_hop(push_token::hop h) noexcept {
  if (h.target == push_token::none) return;
  bump(token_hops_);
  if (shared_.peers[h.target]->hand_token(h.seq)) bump(doorbells_sent_);
}

void worker::serve_token() noexcept {
  // Relaxed first look: the common case (no hop) costs no RMW.
  if (token_seq_.load(std::memory_order_relaxed) == 0) return;
  // Acquire: pairs with the release store in hand_token().
  const std::uint64_t seq = token_seq_.exchange(0, std::memory_order_acquire);
  if (seq == 0) return;
  push_tasks(push_failed_at_);  // always try: a worker lowered and asked
  send_hop(shared_.token->forward(id_, seq, *shared_.overload, now_ns()));
}

bool worker::pull_one(unsigned source) noexcept {
  if (!shared_.migrate->pull_from(id_, source)) return false;
  bump(pulls_);
  return true;
}

unsigned worker::take_over_stuck_token() noexcept {
  push_token& token = *shared_.token;
  if (shared_.migration != migration_mode::push_ipi || !token.travelling()) return push_token::none;
  const push_token::takeover t =
      token.take_over_stuck(id_, *shared_.overload, now_ns(), shared_.ipi_timeout.count());
  send_hop(t.next);
  return t.stuck;
}

void worker::release_due() noexcept {
  if (timers_.empty()) return;
  const clock::time_point now = clock::now();
  while (task_node* next = timers_.top()) {
    if (next->release > now) break;
    timers_.pop();
    // A cancelled series ends at its next release instead of running.
    // Acquire: pairs with the release store in periodic_task::cancel().
    if (next->series() != nullptr && next->series()->cancelled.load(std::memory_order_acquire)) {
      discard(next, completed_);
      continue;
    }
    q_.enqueue(next, id_);
  }
}

void worker::end_periodic_series() noexcept {
  // Once stop() has begun, no periodic series starts another release: the
  // series is one task, finished (drain) or dropped (cancel) now.
  series_ended_ = true;
  auto& counter =
      shared_.state.load(std::memory_order_relaxed) == run_state::cancelling ? cancelled_ : completed_;
  timers_.remove_if_not([](task_node* n) { return n->series() == nullptr; },
                        [&](task_node* n) { discard(n, counter); });
}

void worker::discard(task_node* node, std::atomic<std::uint64_t>& counter) noexcept {
  node->payload.drop_fn(node->payload);
  if (periodic_state* series = node->series()) series->release();
  node_pool::release(node);
  bump(counter);
}

namespace {
// liburcu's CDS_WFCQ_WOULDBLOCK, without its C-style cast.
cds_wfcq_node* const would_block = reinterpret_cast<cds_wfcq_node*>(-1L);
}  // namespace

std::size_t worker::drain_inbox() noexcept {
  // Only the nonblocking wfcqueue calls: the blocking ones wait for an
  // enqueuer that was preempted between its tail exchange and its link
  // store by spinning, then sleeping 10 ms per round (WFCQ_WAIT), which no
  // real-time worker can afford. A node whose enqueue is still in flight
  // is taken at a later scheduling point instead; its spawner rings the
  // doorbell when done, so parking meanwhile is safe (see idle()).
  cds_wfcq_node* first =
      __cds_wfcq_first_nonblocking(__cds_wfcq_head_cast(&inbox_head_), &inbox_tail_);
  if (first != nullptr && first != would_block) {
    // The first link is in place, so this cannot return WOULDBLOCK.
    __cds_wfcq_splice_nonblocking(__cds_wfcq_head_cast(&splice_head_), &splice_tail_,
                                  __cds_wfcq_head_cast(&inbox_head_), &inbox_tail_);
  }
  std::size_t moved = 0;
  for (;;) {
    cds_wfcq_node* link =
        __cds_wfcq_dequeue_nonblocking(__cds_wfcq_head_cast(&splice_head_), &splice_tail_);
    if (link == nullptr || link == would_block) break;
    task_node* node = task_node::from_inbox(link);
    URT_TSAN_ACQUIRE(node);
    // The captures' line was written by the spawner on another core: start
    // fetching it now, so the miss overlaps the rest of the walk.
    __builtin_prefetch(node->payload.storage);
    enqueue(node);
    ++moved;
  }
  return moved;
}

bool worker::submit_remote(task_node* node) noexcept {
  cds_wfcq_node_init(&node->inbox);
  URT_TSAN_RELEASE(node);
  cds_wfcq_enqueue(__cds_wfcq_head_cast(&inbox_head_), &inbox_tail_, &node->inbox);
  // A full ring(), fence included: the owner may park while this enqueue's
  // link store is still pending (drain_inbox() cannot see the node yet), so
  // the store must be ordered before the load of the parking flag.
  return bell_.ring();
}

void worker::count_doorbell_sent() noexcept { bump(doorbells_sent_); }

void worker::submit_local(task_node* node) noexcept {
  q_.lock.lock();
  enqueue(node);
  shared_.migrate->publish(id_);  // a more urgent child raises this worker at once
  const std::optional<std::uint64_t> push = push_due();
  q_.lock.unlock();
  // The running task goes on, so the new one does not run next: push it
  // (or a more urgent queued one) to a lower worker if there is one.
  if (push) push_tasks(*push);
}

void worker::bump(std::atomic<std::uint64_t>& counter) noexcept {
  // Single writer: a load and a store, no read-modify-write. Release pairs
  // with finished_acquire() (for completed_/cancelled_); harmless elsewhere.
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void worker::count_local_accept() noexcept { bump(accepted_local_); }

void worker::uncount_local_accept() noexcept {
  // Single writer, like bump(); release for the same pairing.
  accepted_local_.store(accepted_local_.load(std::memory_order_relaxed) - 1,
                        std::memory_order_release);
}

void worker::run_task(task_node* node) noexcept {
  tls_task = node;
  try {
    node->payload.run_fn(node->payload);
  } catch (...) {
    handle_exception(std::current_exception());
  }
  tls_task = nullptr;
  if (periodic_state* series = node->series()) {
    // Release k + 1 is start + (k + 1) * period: drift-free. After an
    // overrun the next releases are already due: catch_up runs them,
    // skip moves on to the first one not yet past (still on the grid).
    // Relaxed state: a stale "running" only re-arms once more, and the
    // series ends at its next release. Acquire: as in release_due().
    if (shared_.state.load(std::memory_order_relaxed) == run_state::running &&
        !series->cancelled.load(std::memory_order_acquire)) {
      node->release += node->period;
      if (series->overrun == overrun_policy::skip) {
        const clock::time_point now = clock::now();
        if (node->release < now) {
          const auto missed = (now - node->release + node->period - clock::duration{1}) / node->period;
          node->release += missed * node->period;
          series->skipped.store(series->skipped.load(std::memory_order_relaxed) +
                                    static_cast<std::uint64_t>(missed),
                                std::memory_order_relaxed);
        }
      }
      timers_.push(node);
      return;
    }
    discard(node, completed_);
  } else {
    node_pool::release(node);  // run_fn destroyed the callable
    bump(completed_);
  }
  if (completed_.load(std::memory_order_relaxed) % hint_interval == 0) publish_load_hint();
}

void worker::publish_load_hint() noexcept {
  // Relaxed: a hint; the next publication corrects a stale one.
  finished_hint_.store(completed_.load(std::memory_order_relaxed) +
                           cancelled_.load(std::memory_order_relaxed),
                       std::memory_order_relaxed);
}

void worker::cancel_queued() noexcept {
  while (task_node* node = q_.pop()) discard(node, cancelled_);
  timers_.remove_if_not([](task_node*) { return false; },
                        [&](task_node* n) { discard(n, cancelled_); });
}

void worker::handle_exception(const std::exception_ptr& error) noexcept {
  bump(exceptions_);
  if (shared_.on_task_exception) {
    try {
      shared_.on_task_exception(error);
    } catch (...) {
      // A throwing handler is counted (above) and ignored: the worker goes on.
    }
    return;
  }
  if (shared_.exception_reported.exchange(true, std::memory_order_relaxed)) return;
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::fprintf(stderr,
               "urt: a task at priority %d on worker %u threw: %s (further exceptions are only "
               "counted; set runtime_options::on_task_exception to handle them)\n",
               tls_task != nullptr ? tls_task->priority : -1, id_, what.c_str());
}

bool worker::work_pending() const noexcept {
  // The inbox check is a wfcqueue read that is safe against concurrent
  // enqueues; a node whose enqueue is still in flight counts as pending
  // (the step that follows takes it once it is linked). The splice list
  // keeps such a node between steps. Relaxed flags: they only decide to
  // take the lock and look (moved_in), or to exchange the hop (token_seq_).
  auto* inbox = const_cast<__cds_wfcq_head*>(&inbox_head_);  // NOLINT: the C API is not const
  auto* spliced = const_cast<__cds_wfcq_head*>(&splice_head_);  // NOLINT: likewise
  return !cds_wfcq_empty(__cds_wfcq_head_cast(inbox), const_cast<cds_wfcq_tail*>(&inbox_tail_)) ||
         !cds_wfcq_empty(__cds_wfcq_head_cast(spliced), const_cast<cds_wfcq_tail*>(&splice_tail_)) ||
         q_.moved_in.load(std::memory_order_relaxed) ||
         token_seq_.load(std::memory_order_relaxed) != 0;
}

void worker::idle(run_state seen) {
  publish_load_hint();
  if (seen != run_state::running) {
    // Tell stop() to look again: this worker has nothing left to run now.
    // Release: pairs with the acquire load in wait_quiescent(), which then
    // sees this worker's finished counts.
    shared_.idle_epoch.fetch_add(1, std::memory_order_release);
    shared_.idle_epoch.notify_all();
  }
  // push_ipi: an idle worker is the one that benefits from migration, so
  // it watches the travelling token: once the pending hop is older than
  // ipi_timeout, it takes the hop over (one pull from the stuck worker).
  clock::time_point token_due = clock::time_point::max();
  if (shared_.migration == migration_mode::push_ipi && shared_.overload->any()) {
    if (const unsigned stuck = take_over_stuck_token(); stuck != push_token::none) {
      // The fallback: one pull from the worker that kept the token.
      bump(fallbacks_);
      pull_one(stuck);
      return;
    }
    const std::int64_t due_ns = shared_.token->hop_deadline(shared_.ipi_timeout.count());
    if (due_ns != std::numeric_limits<std::int64_t>::max() &&
        shared_.token->holder() != id_) {
      token_due = clock::time_point(std::chrono::nanoseconds(due_ns));
    }
  }
  const task_node* first_timer = timers_.top();
  const clock::time_point due = first_timer != nullptr ? first_timer->release : clock::time_point::max();
  // Wake timer_lead() before the release (the advance) and spin to it.
  const clock::time_point timer_wake = first_timer != nullptr ? due - timer_lead() : due;
  const clock::time_point wake = std::min(timer_wake, token_due);
  // Work became visible, the state changed (acquire: pairs with stop()'s
  // store), or it is time to wake for the next release or the token check.
  const auto changed = [&](clock::time_point now) {
    return work_pending() || shared_.state.load(std::memory_order_acquire) != seen ||
           (wake != clock::time_point::max() && now >= wake);
  };
  const auto went_idle = clock::now();
  if (const auto spin = idle_spin(); spin.count() > 0) {
    const auto deadline = went_idle + spin;
    for (unsigned spins = 0;; ++spins) {
      const auto now = clock::now();
      if (changed(now)) return spin_to(due, timer_wake, now);
      cpu_relax();
      if (spins % 64 == 63) {
        if (now >= deadline) break;
        ::sched_yield();
      }
    }
  }
  if (wake != clock::time_point::max()) alarm_.set(wake);
  bell_.rearm();
  bell_.announce_parking();
  // The re-check after the announcement. Parking is safe even when a node's
  // enqueue is still in flight: its spawner rings after linking it; so do
  // a pusher after moving a task in and a token sender after its hop.
  if (const auto now = clock::now(); changed(now)) {
    bell_.cancel_parking();
    return spin_to(due, timer_wake, now);
  }
  parks_.store(parks_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const std::uint64_t alarms = alarm_.fired();
  const std::uint64_t rings = bell_.received();
  io_.run_one();  // returns once the doorbell, the alarm (or another handler) ran
  bell_.cancel_parking();
  const auto woke = clock::now();
  const bool by_alarm = alarm_.fired() != alarms;
  if (by_alarm && wake == timer_wake && learning_advance()) {
    // A parked wake-up by the release's alarm: how late the OS ran us.
    advance_.observe(woke - timer_wake);
    advance_ns_.store(advance_.value().count(), std::memory_order_relaxed);
  }
  if (shared_.idle_spin_policy == spin_policy::adaptive) {
    if (bell_.received() != rings) {
      window_.work_after_park(woke - went_idle);
    } else if (by_alarm) {
      window_.alarm_after_park();
    }
    window_ns_.store(window_.value().count(), std::memory_order_relaxed);
  }
  spin_to(due, timer_wake, woke);
}

std::chrono::nanoseconds worker::idle_spin() const noexcept {
  return shared_.idle_spin_policy == spin_policy::adaptive ? window_.value() : shared_.idle_spin;
}

bool worker::learning_advance() const noexcept {
  return shared_.timer_spin.count() == 0 && shared_.timer_wake == timer_wake_mode::adaptive;
}

std::chrono::nanoseconds worker::timer_lead() const noexcept {
  if (shared_.timer_spin.count() > 0) return shared_.timer_spin;
  return learning_advance() ? advance_.value() : std::chrono::nanoseconds{0};
}

void worker::spin_to(clock::time_point due, clock::time_point wake,
                     clock::time_point woke) noexcept {
  // The last stretch to a release that the worker woke early for is spun,
  // not slept, unless other work shows up meanwhile.
  if (due == clock::time_point::max() || woke >= due) return;
  if (woke < wake) return;  // woken early for something else
  clock::time_point now = woke;
  while (now < due) {
    if (work_pending()) break;
    cpu_relax();
    now = clock::now();
  }
  timer_spin_ns_.store(timer_spin_ns_.load(std::memory_order_relaxed) +
                           static_cast<std::uint64_t>((now - woke).count()),
                       std::memory_order_relaxed);
}

std::uint64_t worker::load() const noexcept {
  // The hint is read last and may be ahead of the acceptances read first
  // (tasks accepted and finished in between): clamp instead of wrapping.
  // Tasks moved away count as finished here, tasks moved in as accepted.
  const std::uint64_t accepted = accepted_remote_.load(std::memory_order_relaxed) +
                                 accepted_local_.load(std::memory_order_relaxed) +
                                 q_.migrated_in.load(std::memory_order_relaxed);
  const std::uint64_t finished = finished_hint_.load(std::memory_order_relaxed) +
                                 q_.migrated_out.load(std::memory_order_relaxed);
  return accepted > finished ? accepted - finished : 0;
}

std::uint64_t worker::finished_acquire() const noexcept {
  return completed_.load(std::memory_order_acquire) + cancelled_.load(std::memory_order_acquire);
}

std::uint64_t worker::accepted_seq_cst() const noexcept {
  return accepted_remote_.load(std::memory_order_seq_cst) +
         accepted_local_.load(std::memory_order_seq_cst);
}

worker_stats worker::stats() const noexcept {
  worker_stats s;
  s.worker = id_;
  s.pu = shared_.topo->workers()[id_].pu;
  s.accepted = accepted_remote_.load(std::memory_order_relaxed) +
               accepted_local_.load(std::memory_order_relaxed);
  s.completed = completed_.load(std::memory_order_relaxed);
  s.cancelled = cancelled_.load(std::memory_order_relaxed);
  s.exceptions = exceptions_.load(std::memory_order_relaxed);
  s.parks = parks_.load(std::memory_order_relaxed);
  s.doorbells = bell_.received();
  s.doorbells_sent = doorbells_sent_.load(std::memory_order_relaxed);
  s.pushes = pushes_.load(std::memory_order_relaxed);
  s.pulls = pulls_.load(std::memory_order_relaxed);
  s.token_hops = token_hops_.load(std::memory_order_relaxed);
  s.fallbacks = fallbacks_.load(std::memory_order_relaxed);
  s.migrated_in = q_.migrated_in.load(std::memory_order_relaxed);
  s.migrated_out = q_.migrated_out.load(std::memory_order_relaxed);
  s.remote_locks = q_.remote_locks.load(std::memory_order_relaxed);
  s.timer_spin_ns = timer_spin_ns_.load(std::memory_order_relaxed);
  s.idle_spin_ns = static_cast<std::uint64_t>(shared_.idle_spin_policy == spin_policy::adaptive
                                                  ? window_ns_.load(std::memory_order_relaxed)
                                                  : shared_.idle_spin.count());
  s.timer_advance_ns = static_cast<std::uint64_t>(
      shared_.timer_spin.count() > 0 ? shared_.timer_spin.count()
                                     : advance_ns_.load(std::memory_order_relaxed));
  return s;
}

worker* worker::current_in(const void* owner) noexcept {
  return tls_owner == owner ? tls_worker : nullptr;
}

}  // namespace urt::detail

namespace urt::this_task {

bool running() noexcept { return detail::tls_task != nullptr; }

namespace {
detail::task_node& current_task() {
  if (detail::tls_task == nullptr) {
    throw std::logic_error("urt::this_task: the calling thread is not running an urt task");
  }
  return *detail::tls_task;
}
}  // namespace

unsigned worker_id() {
  current_task();
  return detail::tls_worker->id();
}

priority_t priority() { return current_task().priority; }

}  // namespace urt::this_task

namespace urt {
bool preempt_point() noexcept {
  return detail::tls_task != nullptr && detail::tls_worker->preempt_point();
}
}  // namespace urt

namespace urt::this_task {

clock::time_point release_time() {
  const detail::task_node& task = current_task();
  return task.timed ? task.release : clock::time_point{};
}

}  // namespace urt::this_task
