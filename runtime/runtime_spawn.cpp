// How a task enters a runtime: the spec's checks, placement and the
// acceptance count (begin), the hand-off to the target worker (commit),
// the checks of timed spawns, and urt::executor's entry points
// (runtime_impl.hpp has the state they share).
//
// runtime_impl.hpp first: it includes urt/executor.hpp (Asio, then
// urt/runtime.hpp) before any standard header. <asio/detail/config.hpp>
// picks asio::aligned_new's allocator by whether a libstdc++ header came
// first, and every urt translation unit includes Asio first, so the library
// holds one definition of it (DESIGN.md, Asio's traps).
#include "runtime_impl.hpp"

#include <sched.h>

#include <string>

#include "clock_now.hpp"
#include "current.hpp"
#include "hot.hpp"
#include "messages.hpp"
#include "node_pool.hpp"

namespace urt {

using detail::run_state;
using detail::task_node;
using detail::worker;
using detail::ns_text;

URT_HOT runtime::spawn_ticket runtime::begin_spawn(const task_spec& spec, const char* api) {
  impl_->check_spec(spec, "task_spec");
  return place_spawn(spec.priority, spec.affinity ? &*spec.affinity : nullptr, spec.group.id(), api,
                     false, relation::fork, when_stopped::refuse);
}

URT_HOT void runtime::impl::check_spec(const task_spec& spec, const char* what) const {
  // Every spawn passes here: the messages are built only when one is thrown.
  const auto field = [what] { return std::string(what); };
  if (!is_valid_priority(spec.priority)) {
    throw std::invalid_argument(field() + ".priority: " + std::to_string(spec.priority) +
                                " is outside " + std::to_string(priority_normal) + ".." +
                                std::to_string(priority_max));
  }
  check_group(spec.group, what, ".group");
  const auto n = static_cast<unsigned>(workers.size());
  if (spec.affinity) {
    if (spec.affinity->empty()) throw std::invalid_argument(field() + ".affinity: the set is empty");
    if (spec.affinity->last() >= n) {
      throw std::invalid_argument(field() + ".affinity: worker " +
                                  std::to_string(spec.affinity->last()) +
                                  " does not exist (the runtime has workers 0-" +
                                  std::to_string(n - 1) + ")");
    }
  }
}

URT_HOT runtime::spawn_ticket runtime::place_spawn(priority_t p, const worker_set* affinity,
                                                   unsigned group, const char* api, bool completion,
                                                   relation rel, when_stopped stopped) {
  const auto n = static_cast<unsigned>(impl_->workers.size());
  // Count the acceptance before writing the node: its seq_cst RMW is a full
  // barrier, cheapest while no stores to the node are pending behind it.
  worker* self = worker::current_in(impl_.get());
  // A continuation from a task may stay on its worker (placement.hpp);
  // kept there, it is queued without the push a local spawn makes.
  const priority_t continuation_of = rel == relation::continuation && self != nullptr &&
                                             detail::current.task != nullptr
                                         ? detail::current.task->priority
                                         : detail::no_continuation;
  const unsigned target = impl_->place->place(p, affinity, self, continuation_of);
  const bool local = self != nullptr && target == self->id();
  // A completion that a task's preempt_point() takes in (its reactor poll)
  // and that placement keeps here is queued without a push too: the same
  // preempt_point() then returns true and the task yields to it, as the
  // kernel preempts the running task for a task woken more urgent on its
  // CPU rather than sending it away; when it may not run here now (its
  // group's budget is spent), that preempt_point() pushes it instead.
  // Pushed at once, it went to an idle worker, which ran it only after its
  // wake-up, or to a busy one and was pulled back (resched.hpp).
  const bool at_preempt_point =
      self != nullptr && detail::current.task != nullptr && detail::current.delivering_io;
  const bool stay = local && (at_preempt_point || detail::continuation_stays(p, continuation_of));
  worker& w = *impl_->workers[target];
  // Outside the runtime's tasks (another thread, or a completion on a worker
  // outside a task, which no task waits for) a spawn backs out once stop()
  // has begun.
  const bool outside = self == nullptr || completion;
  const auto refuse = [&](run_state state) {
    if (stopped == when_stopped::back_out) return spawn_ticket(impl_.get(), nullptr, target, false);
    throw runtime_stopped(std::string(api) + (state == run_state::stopped
                                                  ? ": the runtime is stopped"
                                                  : ": the runtime is stopping"));
  };
  // Already seen stopping: back out before counting, so that a refused
  // spawn does not show in stats().accepted after stop() returned. Relaxed:
  // only an early exit; a stale `running` goes on to the check below.
  if (const run_state early = impl_->shared.state.load(std::memory_order_relaxed);
      outside && early != run_state::running) {
    return refuse(early);
  }
  if (local && !completion) {
    // Inside a task the runtime is never stopped: it waits for this task.
    w.count_local_accept();
  } else {
    // Count first, then look at the state (both seq_cst), mirrored by
    // stop() storing the state, then reading the counts: a spawn either
    // sees the stop and backs out, or stop() sees its count and waits.
    w.count_remote_accept();
    const run_state state = impl_->shared.state.load(std::memory_order_seq_cst);
    if (state != run_state::running && outside) {
      w.uncount_remote_accept();
      impl_->note_change();
      return refuse(state);
    }
  }
  // A completion counted as remote is uncounted as remote if the node or
  // the callable cannot be had.
  const bool counted_local = local && !completion;
  task_node* node = nullptr;
  try {
    node = detail::node_pool::allocate();
  } catch (...) {
    counted_local ? w.uncount_local_accept() : w.uncount_remote_accept();
    impl_->note_change();
    throw;
  }
  node->priority = p;
  node->any_worker = affinity == nullptr;
  node->migratable = node->any_worker ? n > 1 : affinity->count() > 1;
  node->group = static_cast<std::uint8_t>(group);
  node->timed = false;
  if (affinity != nullptr) node->affinity = *affinity;
  return spawn_ticket(impl_.get(), node, target, local, counted_local, stay);
}

URT_HOT runtime::spawn_ticket runtime::begin_executor_spawn(priority_t p,
                                                            const worker_set* affinity,
                                                            unsigned group, relation rel) {
  const bool completion = detail::current.owner == impl_.get() && detail::current.task == nullptr;
  // Asio calls execute() where an exception can only end the process: a
  // suspended coroutine's destructor posts the frame's destruction to its
  // executor, and co_spawn does it again while unwinding from a refused
  // first post. So once stop() has begun an executor backs out: the
  // function object is destroyed unrun by its caller, as Asio destroys a
  // stopped io_context's handlers (executor.hpp, "Errors").
  return place_spawn(p, affinity, group, "urt::executor::execute", completion, rel,
                     when_stopped::back_out);
}

urt::executor runtime::executor(const task_spec& spec) {
  impl_->check_spec(spec, "runtime::executor: task_spec");
  // Acquire: pairs with stop()'s seq_cst store of the state. Only a
  // refusal: an executor made while stop() begins backs out of its first
  // spawn (begin_executor_spawn()).
  if (impl_->shared.state.load(std::memory_order_acquire) != run_state::running) {
    throw runtime_stopped("runtime::executor: the runtime is stopping or stopped");
  }
  const worker_set* affinity = spec.affinity ? impl_->intern(*spec.affinity) : nullptr;
  unsigned home = affinity != nullptr ? static_cast<unsigned>(affinity->first()) : 0;
  if (worker* self = worker::current_in(impl_.get());
      self != nullptr && detail::current.task != nullptr &&
      (affinity == nullptr || affinity->contains(self->id()))) {
    home = self->id();
  }
  return urt::executor(this, affinity, home, spec.priority, spec.group.id());
}

urt::executor runtime::executor(const task_spec& spec, unsigned home) {
  impl_->check_spec(spec, "runtime::executor: task_spec");
  if (const std::size_t n = worker_count(); home >= n) {
    throw std::invalid_argument("runtime::executor: home: worker " + std::to_string(home) +
                                " does not exist (the runtime has workers 0-" +
                                std::to_string(n - 1) + ")");
  }
  if (spec.affinity && !spec.affinity->contains(home)) {
    throw std::invalid_argument("runtime::executor: home: worker " + std::to_string(home) +
                                " is outside task_spec.affinity");
  }
  // Acquire: as in executor(spec).
  if (impl_->shared.state.load(std::memory_order_acquire) != run_state::running) {
    throw runtime_stopped("runtime::executor: the runtime is stopping or stopped");
  }
  const worker_set* affinity = spec.affinity ? impl_->intern(*spec.affinity) : nullptr;
  return urt::executor(this, affinity, home, spec.priority, spec.group.id());
}

const worker_set* runtime::impl::intern(const worker_set& set) {
  std::lock_guard lock(affinities_mutex);
  for (const worker_set& known : affinities) {
    if (known == set) return &known;
  }
  if (affinities.size() >= max_executor_affinities) {
    throw std::length_error("runtime::executor: task_spec.affinity: " +
                            std::to_string(max_executor_affinities) +
                            " distinct executor affinities exist already "
                            "(runtime::max_executor_affinities)");
  }
  return &affinities.emplace_back(set);
}

bool runtime::executor_may_inline(priority_t p, const worker_set* affinity,
                                  unsigned group) const noexcept {
  const detail::thread_context& c = detail::current;
  return c.owner == impl_.get() && c.task != nullptr && !c.delivering_io &&
         c.task->priority == p && c.task->group == group &&
         (affinity == nullptr || affinity->contains(c.self->id()));
}

asio::io_context& runtime::executor_context(unsigned w) const noexcept {
  return impl_->workers[w]->io();
}

void runtime::executor_work(unsigned w, int delta) const noexcept {
  impl_->workers[w]->count_io_work(delta);
}

URT_HOT void runtime::commit_spawn(spawn_ticket& ticket) noexcept {
  worker& w = *impl_->workers[ticket.target_];
  if (ticket.local_) {
    w.submit_local(ticket.node_, ticket.keep_ ? worker::local_spawn::keep : worker::local_spawn::push);
    ticket.node_ = nullptr;
    return;
  }
  // A remote spawn goes through the target's lock-free inbox, even when the
  // target is busy: the task reaches its run queue, where cpupri, the
  // overload mask and migration see it, at the target's next scheduling
  // point (the kernel's remote wake list, without the IPI that cannot
  // interrupt a running task here). Taking the target's queue lock instead
  // made it visible at once but cut external spawn throughput to a quarter
  // (urt-spawn-bench: 1.8 against 7.4 M tasks/s), contending with the owner
  // on every spawn.
  // Read before the hand-off: once queued, the node may run and go. A timed
  // node's ring only resets the worker's alarm: nothing runs now.
  const bool fifo_now = !ticket.node_->timed && ticket.node_->priority > priority_normal;
  // An outside caller on the target's own CPU: the target is not running
  // now, however awake it looks (placement.hpp).
  const bool off_cpu = fifo_now && worker::current_in(impl_.get()) == nullptr &&
                       impl_->place->on_callers_cpu(ticket.target_);
  const bool rang = w.submit_remote(ticket.node_, off_cpu);
  if (rang) {
    // Attributed to the sending worker; rings from outside threads are
    // counted only where they are received.
    if (worker* self = worker::current_in(impl_.get())) {
      self->count_doorbell_sent();
    } else if (fifo_now && impl_->place->caller_yields_to(ticket.target_)) {
      // The outside caller woke its own CPU's worker for a FIFO-class task:
      // it hands that CPU over (placement.hpp).
      w.count_wake_yield();
      ::sched_yield();
    }
  }
  ticket.node_ = nullptr;
}

void runtime::commit_timed(spawn_ticket& ticket, clock::time_point release,
                           std::chrono::nanoseconds period,
                           detail::periodic_state* state) noexcept {
  task_node* node = ticket.node_;
  node->timed = true;
  node->release = release;
  node->called_at = detail::clock_now();  // a release already past now is a spawn made now
  node->period = period;
  node->periodic = state;
  commit_spawn(ticket);
}

void runtime::check_deadline(clock::time_point deadline) {
  // A release at max() never comes (the timer queue keeps it last and the
  // parker sets no alarm for it), so stop(drain) would wait for it forever.
  if (deadline == clock::time_point::max()) {
    throw std::invalid_argument(
        "runtime::spawn_at: deadline time_point::max() never comes (stop(drain) would wait for "
        "it forever)");
  }
}

void runtime::check_period(std::chrono::nanoseconds period) {
  if (period.count() <= 0) {
    throw std::invalid_argument("runtime::every: period " + ns_text(period) + " is not positive");
  }
}

void runtime::check_start(clock::time_point start) {
  // As spawn_at's deadline: the first release would never come. stop()
  // would end the series unrun; a series that can never run is a mistake.
  if (start == clock::time_point::max()) {
    throw std::invalid_argument("runtime::every: start time_point::max() never comes");
  }
}

void runtime::check_overrun(overrun_policy overrun) {
  if (overrun != overrun_policy::catch_up && overrun != overrun_policy::skip) {
    throw std::invalid_argument("runtime::every: overrun " +
                                std::to_string(static_cast<int>(overrun)) +
                                " is not an overrun_policy");
  }
}

runtime::spawn_ticket::~spawn_ticket() {
  if (node_ == nullptr) return;  // committed
  // The callable's construction threw: un-accept the task.
  worker& w = *rt_->workers[target_];
  if (counted_local_) {
    w.uncount_local_accept();
  } else {
    w.uncount_remote_accept();
  }
  rt_->note_change();
  detail::node_pool::release(node_);
}

detail::task_payload* runtime::spawn_ticket::payload() const noexcept { return &node_->payload; }


}  // namespace urt
