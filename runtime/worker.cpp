// A worker's thread (worker.hpp has the class): its start and end, its loop
// and scheduling step (budgets, the pick, preempt points), running a task
// and the ways a task leaves unrun. How tasks reach it is in
// worker_handoff.cpp, its timed releases in worker_timers.cpp, what it does
// with nothing to run in worker_idle.cpp, what others read of its counters
// in worker_stats.cpp.
#include "worker.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "bandwidth_table.hpp"
#include "clock_now.hpp"
#include "current.hpp"
#include "fair_slice.hpp"
#include "hot.hpp"
#include "migrator.hpp"
#include "node_pool.hpp"
#include "qsbr.hpp"
#include "signal_mask.hpp"

namespace urt::detail {

worker::worker(runtime_shared& shared, unsigned id)
    : shared_(shared),
      id_(id),
      io_poll_(io_, io_poller::config::from(*shared.options)),
      parker_(io_, io_poll_.lease(), parker::config::from(*shared.options), counters_),
      balancer_(
          id, balancer::config::from(*shared.options),
          balancer::shared_parts{*shared.migrate, *shared.prio_map, *shared.overload, *shared.token,
                                 *shared.bells, *shared.resched, *shared.strand,
                                 static_cast<unsigned>(shared.topo->worker_count())},
          q_, counters_),
      bandwidth_(shared.options->bandwidth, clock_now()),
      cids_(*shared.cids, id),
      strand_watch_(id, shared.options->ipi_timeout),
      io_watch_(id, shared.options->io_poll_interval + shared.options->ipi_timeout,
                shared.options->io_poll_interval) {}

worker::~worker() {
  if (thread_.joinable()) thread_.join();
}

void worker::start(startup& st) {
  // The thread inherits this mask: it never takes a blocked signal, not
  // even before its first instruction (signal_mask.hpp).
  const scoped_signal_block block(shared_.options->block_signals ? async_signals() : no_signals());
  try {
    thread_ = std::thread([this, &st] { main(st); });
  } catch (const std::system_error& e) {
    // EAGAIN: the process's thread limit (RLIMIT_NPROC, pids.max) or no
    // memory for the stack.
    throw std::system_error(e.code(), "runtime: cannot start worker " + std::to_string(id_) +
                                          "'s thread (the limit on threads or memory)");
  }
}

void worker::join() {
  if (thread_.joinable()) thread_.join();
}

void worker::main(startup& st) {
  bool registered = false;
  try {
    set_up();
    current.self = this;
    current.owner = shared_.owner;
    qsbr::register_thread();
    registered = true;
    shared_.bandwidth_params->adopt_call_rcu_thread();
    parker_.arm();
    // On this thread: the ring runs its deferred work only for the thread
    // that made it (ready_ring.hpp).
    io_poll_.open_ready_ring();
  } catch (...) {
    if (registered) qsbr::unregister_thread();
    current.self = nullptr;
    current.owner = nullptr;
    {
      std::lock_guard lock(st.mutex);
      if (!st.error) st.error = std::current_exception();
    }
    st.done.count_down();
    return;
  }
  q_.lock.lock();
  shared_.migrate->publish(id_);  // idle: routable from now on
  q_.lock.unlock();
  // The constructor returns once every worker is here, so that placement
  // sees all of them idle from the first spawn on.
  st.done.count_down();  // `st` may be gone after this
  loop();
  qsbr::unregister_thread();
  parker_.disarm();
  const io_lease::exclusive hold(io_poll_.lease());  // a rescuer may still look in
  work_.reset();
  io_.poll();  // completes the cancelled wait so its handler memory is freed
  io_poll_.close_ready_ring();
  current.self = nullptr;
  current.owner = nullptr;
}

void worker::set_up() {
  const std::string name = "urt-w" + std::to_string(id_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  shared_.topo->bind_current_thread(id_, shared_.options->binding);
  // A parked worker's futex deadline (parker.hpp) is an hrtimer that the
  // kernel lets fire up to the thread's timer slack late: 50 us by default
  // for SCHED_OTHER threads (0 under SCHED_FIFO). A timed release must not
  // inherit that; 1 ns is the least prctl takes (0 restores the default).
  // Cannot fail for a valid value.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const runtime_options& o = *shared_.options;
  if (o.policy == worker_policy::other && o.os_slice.count() > 0) {
    fair_slice::request(o.os_slice, id_);
  }
  if (o.policy == worker_policy::fifo) {
    sched_param param{};
    param.sched_priority = o.fifo_priority;
    if (const int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param); err != 0) {
      throw std::system_error(
          err, std::generic_category(),
          "runtime_options.policy: SCHED_FIFO at fifo_priority " +
              std::to_string(o.fifo_priority) + " refused for worker " + std::to_string(id_) +
              (err == EPERM ? " (needs root, CAP_SYS_NICE or a large enough RLIMIT_RTPRIO)" : ""));
    }
  }
}

URT_HOT void worker::loop() {
  for (;;) {
    // Acquire: pairs with the seq_cst store in stop(); a worker that sees
    // a new state sees everything stop() did before it.
    const run_state seen = shared_.state.load(std::memory_order_acquire);
    // Completions that arrived meanwhile become tasks before the pick.
    // Once stop() began they wait: stop(drain) runs accepted tasks, not
    // I/O that has yet to complete (DESIGN.md, "Worker-owned I/O").
    if (seen == run_state::running) poll_io();
    if (task_node* node = step(seen)) {
      run_task(node);
      parker_.worked();
      continue;
    }
    if (std::exchange(look_again_, false)) continue;
    if (seen == run_state::stopped) return close();
    idle(seen);
  }
}

URT_HOT task_node* worker::quick_step() noexcept {
  q_.lock.lock();
  quick_pick::view v;
  v.ran = q_.running;
  v.queue_top = q_.rq.top_level();
  v.inbox_top = inbox_.top();
  v.inbox_walking = inbox_.walking_level();
  v.lowered = q_.lowered;
  v.fifo_held = q_.fifo_held;
  v.budgets_look = budgets_look();
  v.params_changed = shared_.bandwidth_params->version() != bandwidth_version_;
  v.timers = !timers_.empty() || inbox_.timed_pending();
  v.resched_above = shared_.resched->pending_above(v.ran);
  v.hop_pending = balancer_.hop_pending();
  v.put_off = put_off_cancelled_ != nullptr || put_off_completed_ != nullptr;
  if (!quick_pick::allows(v)) {
    q_.lock.unlock();
    return nullptr;
  }
  // What step() does around the same pick (q_.running stays: same level).
  task_node* node = q_.pop();
  if (const rq_link* head = q_.rq.peek(); head != nullptr) __builtin_prefetch(head->next, 1);
  shared_.strand->point(id_, [this] { return inbox_.pending(); });
  shared_.migrate->publish(id_);  // the pushable top, when `node` was its last
  const std::optional<std::uint64_t> push = balancer_.push_due();
  q_.lock.unlock();
  qsbr::quiescent();
  cids_.at_switch(node->group);
  if (push) balancer_.push_tasks(*push);
  quick_.taken();
  worker_counters::bump_relaxed(counters_.quick_picks);
  return node;
}

URT_HOT task_node* worker::step(run_state seen) noexcept {
  // After a task, its successor without the rest of this step when nothing
  // the step decides on has changed (quick_pick.hpp).
  if (seen == run_state::running && quick_.may_try()) {
    if (task_node* node = quick_step()) return node;
  }
  quick_.full_step();
  migrator& m = *shared_.migrate;
  q_.lock.lock();
  const int before = q_.published;  // the level this worker showed until now
  q_.running = cpupri::level_idle;  // the previous task (if any) is done
  q_.moved_in.store(false, std::memory_order_relaxed);  // we look now
  const clock::time_point horizon = release_horizon();
  drain_inbox(horizon);
  shared_.strand->point(id_, [this] { return inbox_.pending(); });
  if (seen != run_state::running && !series_ended_) end_periodic_series();
  if (seen == run_state::cancelling) cancel_queued();
  release_due(horizon);
  // Hook before the pick: the budgets may hold FIFO work back. A hold
  // shows in the level published below (rt_queue::fifo_held).
  const pick_rule rule = consult_budgets(seen != run_state::running);
  // An urgent task queued behind another worker's running task runs here
  // when nothing here is as urgent (resched.hpp); the pick then takes it.
  // Not while a group is held here: the pulled task could be one of it.
  if (!rule.groups_held) serve_resched(claim_floor());
  // Lowering: since the last step (the previous task is done), or since a
  // move took our queued top away (rt_queue::lowered).
  const bool lowered = q_.current() < before || std::exchange(q_.lowered, false);
  if (lowered && balancer_.acts_on_lowering()) {
    // Show the level we would run at, and migrate before committing to a
    // task (a running task cannot be preempted by one that arrives a
    // moment later).
    m.publish(id_);
    if (balancer_.overload_seen_after_lowering()) {
      q_.lock.unlock();
      balancer_.on_lowering(balancer::wait_for_push::yes);
      q_.lock.lock();
    }
  }
  // Cancelling: what a push or pull moved in while the lowering released
  // the lock is dropped too; nothing queued runs once the stop is seen.
  if (seen == run_state::cancelling) cancel_queued();
  // A level above the queue's top still being walked into order holds
  // spawns that returned (inbox.hpp): no pick below it; the next step
  // walks on, a chunk at a time, looking at more urgent levels first.
  task_node* node = nullptr;
  if (inbox_.walking_level() > q_.rq.top_level()) {
    look_again_ = true;
  } else {
    node = pick(rule);
  }
  if (node != nullptr) {
    // Unlinking `node` pulled in the new head; start fetching the one
    // after it, so a long queue costs overlapping misses, not serial ones.
    if (const rq_link* head = q_.rq.peek(); head != nullptr) __builtin_prefetch(head->next, 1);
    q_.running = node->priority;
  }
  // What an idle wait after this step watches for: a request this step
  // would have claimed (idle()). None while a group is held here (no
  // claims); above every request while FIFO work is held (current() is
  // priority_max then).
  claim_level_ = rule.groups_held ? priority_max : q_.current();
  m.publish(id_);
  const std::optional<std::uint64_t> push = balancer_.push_due();
  q_.lock.unlock();
  // A destructor may spawn onto this worker after the pick: look again
  // before idling.
  if (discard_put_off() && node == nullptr) look_again_ = true;
  // Hook after the pick: the concurrency ID held for the group that ran
  // is kept for the next task of that group, or given up (cid.hpp).
  cids_.at_switch(node != nullptr ? node->group : -1);
  if (push) balancer_.push_tasks(*push);  // after each task switch (push_rt_tasks)
  balancer_.serve_token();
  return node;
}

URT_HOT worker::pick_rule worker::consult_budgets(bool stopping) noexcept {
  pick_rule rule;
  // QSBR: the previous step's parameter block is no longer in use.
  qsbr::quiescent();
  if (const bandwidth_table::block* p = shared_.bandwidth_params->read();
      p->version != bandwidth_version_) {
    const clock::time_point now = clock_now();  // set_bandwidth() or make_group() was called
    // Only what changed is reconfigured (a new period, no hold): an
    // unchanged budget keeps its period and what it used.
    if (!bandwidth_.has(p->runtime_wide)) {
      bandwidth_.configure(p->runtime_wide, now);
      q_.fifo_held = false;  // a new configuration starts with FIFO allowed
    }
    groups_.configure(p->groups, now);
    bandwidth_version_ = p->version;
  }
  // Once stop() has begun, nothing is held back: under a strict budget of
  // 1 ms an hour, a drain of five 2-ms FIFO tasks would otherwise take
  // four hours (stop(cancel) drops them anyway). The time of the tasks run
  // meanwhile is not charged to any budget.
  if (stopping) {
    // Holds in progress end now, their time counted.
    if (bandwidth_.holding() || groups_.any_held()) {
      const clock::time_point now = clock_now();
      bandwidth_.release(now);
      groups_.release_holds(now);
    }
    q_.fifo_held = false;
    return rule;
  }
  if (!budgets_look()) return rule;
  const clock::time_point now = clock_now();
  if (groups_.any()) rule.groups_held = groups_.look(now);
  if (bandwidth_.active()) {
    bandwidth_.tick(now);
    rule.allow = bandwidth_.decide(now, q_.rq.has(priority_normal));
    q_.fifo_held = bandwidth_.holding();
    rule.budget_looked = true;
  }
  return rule;
}

URT_HOT bool worker::budgets_look() const noexcept {
  if (groups_.any()) return true;  // group budgets charge every FIFO task switch
  if (!bandwidth_.active()) return false;
  // The class pop() would take without a budget.
  const int top = q_.rq.top_level();
  const run_class next = top < 0 ? run_class::idle : class_of_task(top);
  return bandwidth_.must_look(next, q_.rq.has(priority_normal));
}

URT_HOT task_node* worker::pick(const pick_rule& rule) noexcept {
  task_node* node = nullptr;
  if (rule.allow == bandwidth::allow::normal_only) {
    node = q_.pop_normal();
  } else if (rule.groups_held) {
    node = q_.pop_first([this](const task_node& n) { return groups_.allowed(n); });
  } else {
    node = q_.pop();
  }
  if (rule.budget_looked) {
    bandwidth_.picked(node != nullptr ? class_of_task(node->priority) : run_class::idle);
  }
  if (groups_.any()) groups_.picked(node);
  return node;
}

void worker::close() noexcept {
  q_.lock.lock();
  q_.running = cpupri::level_invalid;  // nothing may be moved in any more
  shared_.migrate->publish(id_);
  q_.lock.unlock();
}

URT_HOT void worker::enqueue(task_node* node, clock::time_point due_by) noexcept {
  if (node->timed) {
    if (series_ended_ && node->series() != nullptr) {
      // A series made by a task still running when stop() began, reaching
      // this worker after it ended its series: it ends as it arrives, as
      // end_periodic_series() would have ended it.
      discard_unlocked(node, shared_.state.load(std::memory_order_relaxed) ==
                                 run_state::cancelling);
      return;
    }
    // Past already when spawn_at()/every() was called: a spawn made then.
    // It joins the run queue in its place among the nodes taken in with it,
    // not after them at this step's release_due(); the timer queue's nodes
    // released by that moment go first, in release order, but only those
    // due by `due_by`, a time before which every timed spawn that returned
    // is in the timer queue already (a node due earlier than them, still in
    // the inbox, would otherwise queue after them). A release that
    // came while the node was on its way (a slow intake) waits in the timer
    // queue like any other, so that releases keep deadline order. Not a
    // series once stop() began: this step's end_periodic_series() ends it
    // unrun, as every series (a stale `running` releases it once, as
    // release_due() would).
    if (node->release <= node->called_at &&
        (node->series() == nullptr ||
         shared_.state.load(std::memory_order_relaxed) == run_state::running)) {
      const clock::time_point bound = std::min(node->called_at, due_by);
      while (task_node* earlier = timers_.top()) {
        if (earlier->release > bound) break;
        timers_.pop();
        release(earlier);
      }
      release(node);
      return;
    }
    timers_.push(node);
  } else {
    q_.enqueue(node, id_);
  }
}

URT_HOT std::size_t worker::poll_io_now() noexcept {
  const clock::time_point now = clock_now();
  std::size_t ran = 0;
  try {
    ran = io_poll_.at_scheduling_point(now);
  } catch (...) {
    handle_exception(std::current_exception());
    ran = 1;  // a completion ran (its spawn failed)
  }
  // A peer whose reactor nobody has looked into for too long, switched
  // out by the OS while its tasks are queued or running (io_rescue.hpp):
  // polled here, busy as this worker is. Not once stop() began, when
  // completions are no longer delivered (relaxed: a stale state only
  // delays the stop of the rescues to the next poll).
  if (shared_.state.load(std::memory_order_relaxed) == run_state::running) {
    if (const io_watch::plan io = io_watch_.while_busy(*shared_.reactors, now);
        io.rescue != io_watch::none) {
      ran += rescue_peer_io(io.rescue);
    }
  }
  return ran;
}

URT_HOT std::size_t worker::rescue_peer_io(unsigned w) noexcept {
  std::size_t ran = 0;
  try {
    ran = shared_.reactors->rescue(w);
  } catch (...) {
    handle_exception(std::current_exception());  // a completion's spawn failed
    ran = 1;
  }
  if (ran > 0) worker_counters::bump_relaxed(counters_.io_rescued, ran);
  return ran;
}

URT_HOT bool worker::preempt_point() noexcept {
  // Relaxed: a stale state only applies the budgets once more.
  const bool stopping = shared_.state.load(std::memory_order_relaxed) != run_state::running;
  // A completion for this worker is a scheduling event like a spawn: take
  // it in here, so that a long task's preempt points see it.
  if (!stopping) poll_io();
  q_.lock.lock();
  const clock::time_point horizon = release_horizon();
  drain_inbox(horizon);
  shared_.strand->point(id_, [this] { return inbox_.pending(); });
  release_due(horizon);
  shared_.migrate->publish(id_);
  // An urgent task behind another worker's running task, when the running
  // one here is less urgent: pulled here, it is run at the yield below
  // (not while a group is held here: it could be one of that group's).
  if (!groups_.any_held()) serve_resched(claim_floor());
  // Between steps only a move out of our queue lowers us (rt_queue::lowered).
  const bool lowered = std::exchange(q_.lowered, false) && balancer_.acts_on_lowering();
  bool urgent = q_.rq.top_level() > q_.running;
  // Once stop() began the budgets hold nothing back (consult_budgets()).
  if (urgent && !stopping && groups_.any_held()) {
    // A held group's task is not urgent here: only one that may run is.
    urgent = q_.rq.first_where(
                 [this](rq_link* l) { return groups_.allowed(*task_node::from_rq(l)); },
                 q_.running) != nullptr;
  }
  if (!stopping && bandwidth_.active() &&
      (q_.fifo_held || (q_.running > priority_normal &&
                        bandwidth_.must_look(run_class::fifo, q_.rq.has(priority_normal))))) {
    // While FIFO is held back nothing queued is more urgent than the
    // normal task running, until the period ends; a FIFO task that has
    // spent the budget yields where the budget holds FIFO back.
    bandwidth_.tick(clock_now());
    if (q_.fifo_held) urgent = urgent && !bandwidth_.holding();
  }
  // A queued task more urgent than the running one runs here as soon as
  // the caller yields: push_rt_task reschedules instead of pushing in that
  // case, and so does this. Pushing it would send it to a lower worker that
  // is itself running a task, which at its own preemption point would push
  // it on again: the task could bounce between workers without running.
  // The push and the token hop wait for the step after the yield.
  // A level above the running task still being walked into order: as if
  // queued (nothing is known of its tasks yet; the step walks it on).
  if (!q_.fifo_held && inbox_.walking_level() > q_.running) urgent = true;
  const bool yield_to_queued = urgent;
  if (!urgent && !stopping && q_.running > priority_normal && bandwidth_.active() &&
      bandwidth_.would_hold(q_.rq.has(priority_normal))) {
    urgent = true;  // the budget is spent: yield so that the step holds FIFO back
  }
  const std::optional<std::uint64_t> push =
      yield_to_queued ? std::nullopt : balancer_.push_due();
  q_.lock.unlock();
  discard_put_off();
  if (push) balancer_.push_tasks(*push);
  if (!yield_to_queued) balancer_.serve_token();
  // Lowered while running: pull what is now more urgent than the running
  // task, or ask for a push, without waiting for it (the task runs on).
  const bool pulled_or_asked = lowered && balancer_.overload_seen_after_lowering();
  if (pulled_or_asked) balancer_.on_lowering(balancer::wait_for_push::no);
  if ((urgent && push.has_value()) || pulled_or_asked) {
    // The urgent task may just have been pushed to a worker that runs it
    // now, or one more urgent than the running task pulled here.
    q_.lock.lock();
    urgent = q_.rq.top_level() > q_.running;
    q_.lock.unlock();
  }
  return urgent;
}

void worker::discard(task_node* node, std::atomic<std::uint64_t>& counter) noexcept {
  node->payload.drop_fn(node->payload);
  if (periodic_state* series = node->series()) series->release();
  node_pool::release(node);
  worker_counters::bump_release(counter);
}

void worker::discard_unlocked(task_node* node, bool cancelled) noexcept {
  task_node*& head = cancelled ? put_off_cancelled_ : put_off_completed_;
  node->rq.next = head != nullptr ? &head->rq : nullptr;
  head = node;
}

URT_HOT bool worker::discard_put_off() noexcept {
  if (put_off_cancelled_ == nullptr && put_off_completed_ == nullptr) return false;
  for (task_node** list : {&put_off_cancelled_, &put_off_completed_}) {
    auto& counter = list == &put_off_cancelled_ ? counters_.cancelled : counters_.completed;
    for (task_node* node = std::exchange(*list, nullptr); node != nullptr;) {
      task_node* next = node->rq.next != nullptr ? task_node::from_rq(node->rq.next) : nullptr;
      node->rq.next = nullptr;  // unlinked, as the pool expects it
      discard(node, counter);
      node = next;
    }
  }
  return true;
}

void worker::count_io_work(int delta) noexcept {
  if (delta < 0) {
    io_poll_.work_finished();
    return;
  }
  // The count's RMW, then ring()'s seq_cst fence and its load of the
  // doorbell word: the Dekker pair with the parker's announcement and its
  // re-check of the count (parker.cpp), so a worker never sleeps on the
  // futex while I/O it must poll is outstanding.
  if (io_poll_.work_started()) parker_.ring();
}

URT_HOT void worker::run_task(task_node* node) noexcept {
  // A series cancelled after its release was queued (behind more urgent
  // work) ends here unrun: no release starts once the worker sees the flag.
  // Acquire: pairs with the release store in periodic_task::cancel().
  if (periodic_state* series = node->series();
      series != nullptr && series->cancelled.load(std::memory_order_acquire)) {
    discard(node, counters_.completed);
    return;
  }
  current.task = node;
  try {
    node->payload.run_fn(node->payload);
  } catch (...) {
    handle_exception(std::current_exception());
  }
  current.task = nullptr;
  // Hook: a mechanism that accounts for the time a task ran (a bandwidth
  // budget) or for the ids it held (concurrency IDs) is told here.
  if (periodic_state* series = node->series()) {
    rearm_series(node, *series);
  } else {
    node_pool::release(node);  // run_fn destroyed the callable
    worker_counters::bump_release(counters_.completed);
  }
  if (counters_.completed.load(std::memory_order_relaxed) % hint_interval == 0) {
    publish_load_hint();
  }
}

URT_HOT void worker::publish_load_hint() noexcept {
  // Relaxed: a hint; the next publication corrects a stale one.
  counters_.finished_hint.store(counters_.completed.load(std::memory_order_relaxed) +
                                    counters_.cancelled.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
}

void worker::cancel_queued() noexcept {
  while (task_node* node = q_.pop()) discard_unlocked(node, true);
  timers_.remove_if_not([](task_node*) { return false; },
                        [&](task_node* n) { discard_unlocked(n, true); });
}

void worker::handle_exception(const std::exception_ptr& error) noexcept {
  worker_counters::bump_relaxed(counters_.exceptions);
  const runtime_options& o = *shared_.options;
  if (o.on_task_exception) {
    try {
      o.on_task_exception(error);
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
               current.task != nullptr ? current.task->priority : -1, id_, what.c_str());
}

URT_HOT worker* worker::current_in(const void* owner) noexcept {
  return current.owner == owner ? current.self : nullptr;
}

}  // namespace urt::detail
