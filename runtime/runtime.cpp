// urt/executor.hpp (Asio, then urt/runtime.hpp) before any standard header:
// <asio/detail/config.hpp> picks asio::aligned_new's allocator by whether a
// libstdc++ header came first, and every urt translation unit includes Asio
// first, so the library holds one definition of it (DESIGN.md, Asio's traps).
#include "urt/executor.hpp"
#include "urt/runtime.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "bandwidth_table.hpp"
#include "cid.hpp"
#include "current.hpp"
#include "messages.hpp"
#include "migrator.hpp"
#include "node_pool.hpp"
#include "placement.hpp"
#include "resched.hpp"
#include "worker.hpp"

namespace urt {

using detail::run_state;
using detail::task_node;
using detail::worker;
using detail::bad_option;
using detail::ns_text;

namespace {

// The balancers' way to ring other workers: their doorbells, by id.
class worker_bells final : public detail::peer_bells {
 public:
  explicit worker_bells(const std::vector<std::unique_ptr<worker>>& workers) : workers_(workers) {}
  bool ring(unsigned w) noexcept override { return workers_[w]->ring(); }
  bool hand_token(unsigned w, std::uint64_t seq) noexcept override {
    return workers_[w]->hand_token(seq);
  }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

// The idle workers' way to take a stuck worker's inbox in (stranded.hpp).
class worker_inboxes final : public detail::stranded_peers {
 public:
  explicit worker_inboxes(const std::vector<std::unique_ptr<worker>>& workers)
      : workers_(workers) {}
  std::size_t take_in(unsigned w, int above) noexcept override {
    return workers_[w]->take_in_for_peer(above);
  }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

// The idle workers' way to poll a stuck worker's reactor (io_rescue.hpp).
class worker_reactors final : public detail::io_peers {
 public:
  explicit worker_reactors(const std::vector<std::unique_ptr<worker>>& workers)
      : workers_(workers) {}
  unsigned worker_count() const noexcept override {
    return static_cast<unsigned>(workers_.size());
  }
  state look(unsigned w) const noexcept override { return workers_[w]->io_state(); }
  std::size_t rescue(unsigned w) override { return workers_[w]->rescue_io(); }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

}  // namespace

struct runtime::impl {
  explicit impl(runtime_options opts);
  ~impl();

  void note_change() noexcept;
  void ring_all() noexcept;
  // Publishes a budget change (set_bandwidth) and rings every worker.
  void change_bandwidth(detail::function_ref<void(detail::bandwidth_table::block&)> change);
  void wait_quiescent() noexcept;
  void shut_down(run_state via) noexcept;

  runtime_options options;
  urt::topology topo;
  std::unique_ptr<detail::cpupri> prio_map;
  std::unique_ptr<detail::overload_mask> overload;
  detail::push_token token;
  // Outlives the workers, which read it until they exit.
  std::unique_ptr<detail::bandwidth_table> bandwidth_params;
  std::unique_ptr<detail::cid_table> cids;  // outlives the workers too
  std::unique_ptr<detail::stranded_marks> strand;  // outlives the workers too
  std::unique_ptr<detail::resched_requests> resched;  // outlives the workers too
  detail::runtime_shared shared;
  std::vector<std::unique_ptr<worker>> workers;
  worker_bells bells{workers};
  worker_inboxes strand_peers{workers};
  worker_reactors reactors{workers};
  // By worker id, for the migrator: sized before the workers exist (the
  // migrator keeps a span over it), filled in as they are made.
  std::vector<detail::rt_queue*> queues;
  std::unique_ptr<detail::migrator> migrate;
  std::unique_ptr<detail::placement> place;
  std::mutex stop_mutex;
  bool stopped = false;  // guarded by stop_mutex
  // Groups made so far (the default one included): spawners check a
  // task's group against it. Written under the table's writer mutex;
  // release: pairs with the acquire load in check_group().
  std::atomic<unsigned> groups{1};

  // Throws unless `g` is a group of this runtime.
  // (`suffix` is appended to `what` in the message: the field's name.)
  void check_group(const group& g, const char* what, const char* suffix = "") const;
  // Throws std::invalid_argument naming `what`.field for a bad spec.
  void check_spec(const task_spec& spec, const char* what) const;
  // The kept copy of an executor affinity (runtime::executor).
  const worker_set* intern(const worker_set& set);
  std::mutex affinities_mutex;
  std::deque<worker_set> affinities;  // guarded by affinities_mutex; never shrinks
};

namespace {

urt::topology load_topology(const runtime_options& o) {
  try {
    return urt::topology(topology_options{.source = o.topology, .cpus = o.cpus});
  } catch (const std::invalid_argument& e) {
    // Name the field as the user spelled it: runtime_options.cpus, ...
    throw std::invalid_argument(std::string("runtime_options.") + e.what());
  }
}

}  // namespace

runtime::impl::impl(runtime_options opts) : options(std::move(opts)), topo(load_topology(options)) {
  const std::size_t n = topo.worker_count();
  if (n > max_workers) {
    bad_option("cpus", std::to_string(n) + " workers exceed urt::max_workers (" +
                           std::to_string(max_workers) + ")");
  }
  if (options.lock_memory == memory_lock::all && ::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            "runtime_options.lock_memory: mlockall refused (needs root, "
                            "CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK)");
  }
  prio_map = std::make_unique<detail::cpupri>(options.cpupri, topo.workers());
  overload = std::make_unique<detail::overload_mask>(topo.workers());
  bandwidth_params = std::make_unique<detail::bandwidth_table>(options.bandwidth);
  cids = std::make_unique<detail::cid_table>(static_cast<unsigned>(n),
                                             detail::cid_space::config_of(options));
  cids->create(0);  // the default group
  queues.assign(n, nullptr);
  migrate = std::make_unique<detail::migrator>(queues, *prio_map, *overload);
  shared.options = &options;
  shared.topo = &topo;
  shared.prio_map = prio_map.get();
  shared.overload = overload.get();
  shared.migrate = migrate.get();
  shared.token = &token;
  shared.bells = &bells;
  strand = std::make_unique<detail::stranded_marks>(topo.workers());
  shared.strand = strand.get();
  shared.strand_peers = &strand_peers;
  resched = std::make_unique<detail::resched_requests>(topo.workers());
  shared.resched = resched.get();
  shared.reactors = &reactors;
  shared.bandwidth_params = bandwidth_params.get();
  shared.cids = cids.get();
  shared.owner = this;

  workers.reserve(n);
  for (unsigned id = 0; id < n; ++id) {
    workers.push_back(std::make_unique<worker>(shared, id));
    queues[id] = &workers.back()->queue();
  }
  place = std::make_unique<detail::placement>(*prio_map, workers, topo, options.binding,
                                              options.policy);
  detail::startup st(static_cast<std::ptrdiff_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    try {
      workers[i]->start(st);
    } catch (...) {
      std::lock_guard lock(st.mutex);
      if (!st.error) st.error = std::current_exception();
      st.done.count_down(static_cast<std::ptrdiff_t>(n - i));
      break;
    }
  }
  st.done.wait();
  if (st.error) {
    shut_down(run_state::stopped);
    std::rethrow_exception(st.error);
  }
}

runtime::impl::~impl() = default;

void runtime::impl::ring_all() noexcept {
  for (auto& w : workers) w->ring();
}

void runtime::impl::change_bandwidth(
    detail::function_ref<void(detail::bandwidth_table::block&)> change) {
  bandwidth_params->update(change);
  // A worker parked until its held FIFO work's period ends looks at the new
  // block now. The ring's seq_cst fence comes after the update's release
  // stores (the block, its version), and the woken worker's acquire reads
  // of them pair with those.
  ring_all();
}

void runtime::impl::note_change() noexcept {
  // Release: pairs with the acquire load in wait_quiescent().
  shared.idle_epoch.fetch_add(1, std::memory_order_release);
  shared.idle_epoch.notify_all();
}

// Quiescence: every accepted task has finished. Read every worker's
// finished count (acquire) first, then every accepted count. A task that
// was counted finished had its children's acceptances happen before its
// release, so they are counted too; hence finished <= accepted, with
// equality only when no task is queued or running at the moment the
// finished counts were read. Once the state is not running, only running
// tasks can add work (external spawns back out), so equality is final.
void runtime::impl::wait_quiescent() noexcept {
  for (;;) {
    // Acquire: pairs with the release bump in worker::idle()/note_change().
    const std::uint64_t epoch = shared.idle_epoch.load(std::memory_order_acquire);
    std::uint64_t finished = 0;
    for (auto& w : workers) finished += w->finished_acquire();
    std::uint64_t accepted = 0;
    for (auto& w : workers) accepted += w->accepted_seq_cst();
    if (finished == accepted) return;
    shared.idle_epoch.wait(epoch, std::memory_order_acquire);
  }
}

void runtime::impl::shut_down(run_state via) noexcept {
  if (via != run_state::stopped) {
    // seq_cst: pairs with the seq_cst accept count and state load in
    // begin_spawn(); either this store is seen there, or that count here.
    shared.state.store(via, std::memory_order_seq_cst);
    ring_all();
    wait_quiescent();
  }
  // seq_cst like the store above; workers read it with acquire in loop().
  shared.state.store(run_state::stopped, std::memory_order_seq_cst);
  ring_all();
  for (auto& w : workers) w->join();
  // What the workers' io_contexts still hold (a coroutine suspended on a
  // timer or a socket, a handler never completed) is destroyed now, while
  // the runtime is whole, one context at a time on this thread (Asio's
  // reactor shutdown takes no lock: two at once could race on an I/O object
  // of one held by a handler of the other). Asio destroys a coroutine frame
  // by posting to its executor, a urt::executor: with this thread taken for
  // a worker of this runtime outside a task, that post is a completion
  // after the stop and backs out, destroying the callable unrun. Left to
  // ~io_context, it ran on the thread destroying the runtime, after the
  // placement was freed (a use-after-free).
  const detail::thread_context saved = detail::current;
  detail::current = detail::thread_context{.self = nullptr, .owner = this, .task = nullptr};
  for (auto& w : workers) w->shut_down_io();
  detail::current = saved;
}

runtime::runtime(runtime_options options) {
  options.validate();
  impl_ = std::make_unique<impl>(std::move(options));
}

runtime::~runtime() {
  if (worker::current_in(impl_.get()) != nullptr) {
    // It would wait for the very task that destroys it: a programming error
    // that no exception can leave a destructor to report.
    std::fputs("urt: a runtime was destroyed from inside one of its own tasks\n", stderr);
    std::abort();
  }
  stop(stop_mode::drain);
}

runtime::spawn_ticket runtime::begin_spawn(const task_spec& spec, const char* api) {
  impl_->check_spec(spec, "task_spec");
  return place_spawn(spec.priority, spec.affinity ? &*spec.affinity : nullptr, spec.group.id(), api,
                     false, relation::fork);
}

void runtime::impl::check_spec(const task_spec& spec, const char* what) const {
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

runtime::spawn_ticket runtime::place_spawn(priority_t p, const worker_set* affinity,
                                           unsigned group, const char* api, bool completion,
                                           relation rel) {
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
  const bool stay = local && detail::continuation_stays(p, continuation_of);
  worker& w = *impl_->workers[target];
  if (local && !completion) {
    // Inside a task the runtime is never stopped: it waits for this task.
    w.count_local_accept();
  } else {
    // Count first, then look at the state (both seq_cst), mirrored by
    // stop() storing the state, then reading the counts: a spawn either
    // sees the stop and backs out, or stop() sees its count and waits.
    // A completion on a worker outside a task is not waited for by any
    // task, so it backs out like an external spawn, without throwing.
    w.count_remote_accept();
    const run_state state = impl_->shared.state.load(std::memory_order_seq_cst);
    if (state != run_state::running && (self == nullptr || completion)) {
      w.uncount_remote_accept();
      impl_->note_change();
      if (completion) return spawn_ticket(impl_.get(), nullptr, target, false);
      throw runtime_stopped(std::string(api) + (state == run_state::stopped
                                                    ? ": the runtime is stopped"
                                                    : ": the runtime is stopping"));
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

runtime::spawn_ticket runtime::begin_executor_spawn(priority_t p, const worker_set* affinity,
                                                    unsigned group, relation rel) {
  const bool completion = detail::current.owner == impl_.get() && detail::current.task == nullptr;
  return place_spawn(p, affinity, group, "urt::executor::execute", completion, rel);
}

urt::executor runtime::executor(const task_spec& spec) {
  impl_->check_spec(spec, "runtime::executor: task_spec");
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

void runtime::commit_spawn(spawn_ticket& ticket) noexcept {
  worker& w = *impl_->workers[ticket.target_];
  if (ticket.local_) {
    w.submit_local(ticket.node_, ticket.keep_ ? worker::local_spawn::keep : worker::local_spawn::push);
    ticket.node_ = nullptr;
    return;
  }
  // A remote spawn goes through the target's wait-free inbox, even when the
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
  const bool rang = w.submit_remote(ticket.node_);
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

std::size_t runtime::stop(stop_mode mode) {
  if (mode != stop_mode::drain && mode != stop_mode::cancel) {
    throw std::invalid_argument("runtime::stop: mode " + std::to_string(static_cast<int>(mode)) +
                                " is not a stop_mode");
  }
  if (worker::current_in(impl_.get()) != nullptr) {
    throw std::logic_error("runtime::stop: called from inside one of its own tasks, "
                           "which it would wait for");
  }
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return 0;
  impl_->shut_down(mode == stop_mode::cancel ? run_state::cancelling : run_state::draining);
  impl_->stopped = true;
  std::size_t cancelled = 0;
  for (auto& w : impl_->workers) cancelled += w->stats().cancelled;
  return cancelled;
}

void runtime::impl::check_group(const group& g, const char* what, const char* suffix) const {
  if (g == group{}) return;  // the default group of every runtime
  if (g.owner_ != this) {
    throw std::invalid_argument(std::string(what) + suffix + ": group " + std::to_string(g.id()) +
                                " belongs to another runtime");
  }
  // Acquire: pairs with the release store in make_group().
  if (g.id() >= groups.load(std::memory_order_acquire)) {
    throw std::invalid_argument(std::string(what) + suffix + ": group " + std::to_string(g.id()) +
                                " does not exist");
  }
}

group runtime::make_group(const group_options& opts) {
  constexpr std::size_t max_name = 64;
  if (opts.name.size() > max_name) {
    throw std::invalid_argument("runtime::make_group: group_options.name: " +
                                std::to_string(opts.name.size()) + " characters exceed " +
                                std::to_string(max_name));
  }
  if (opts.budget) detail::validate_group_budget(*opts.budget, "runtime::make_group: group_options.budget");
  if (impl_->shared.state.load(std::memory_order_acquire) != run_state::running) {
    throw runtime_stopped("runtime::make_group: the runtime is stopped or stopping");
  }
  unsigned id = 0;
  impl_->bandwidth_params->update([&](detail::bandwidth_table::block& b) {
    if (b.groups.size() >= max_groups) {
      throw std::length_error("runtime::make_group: the runtime has " +
                              std::to_string(max_groups) + " groups already (urt::max_groups)");
    }
    id = static_cast<unsigned>(b.groups.size());
    impl_->cids->create(id);  // before any task of the group can exist
    b.groups.push_back({opts.name, opts.budget});
    // Release: pairs with the acquire load in check_group(); under the
    // writer mutex, so ids and counts agree.
    impl_->groups.store(id + 1, std::memory_order_release);
  });
  return group(impl_.get(), id);
}

void runtime::set_bandwidth(group g, std::optional<group_budget> budget) {
  impl_->check_group(g, "runtime::set_bandwidth");
  if (budget) detail::validate_group_budget(*budget, "runtime::set_bandwidth: budget");
  if (impl_->shared.state.load(std::memory_order_acquire) != run_state::running) {
    throw runtime_stopped("runtime::set_bandwidth: the runtime is stopped or stopping");
  }
  impl_->change_bandwidth(
      [&](detail::bandwidth_table::block& b) { b.groups[g.id()].budget = budget; });
}

group_stats runtime::stats(group g) const {
  impl_->check_group(g, "runtime::stats");
  group_stats s;
  s.id = g.id();
  impl_->bandwidth_params->inspect([&](const detail::bandwidth_table::block& b) {
    s.name = b.groups[g.id()].name;
    s.budget = b.groups[g.id()].budget;
  });
  for (const auto& w : impl_->workers) w->add_group_stats(g.id(), s);
  impl_->cids->space(g.id()).add_stats(s);
  return s;
}

void runtime::set_bandwidth(const bandwidth_options& opts) {
  detail::validate_bandwidth(opts, "runtime::set_bandwidth: bandwidth");
  if (impl_->shared.state.load(std::memory_order_acquire) != run_state::running) {
    throw runtime_stopped("runtime::set_bandwidth: the runtime is stopped or stopping");
  }
  impl_->change_bandwidth([&](detail::bandwidth_table::block& b) { b.runtime_wide = opts; });
}

std::size_t runtime::cid_space_size(group g, const char* what) const {
  impl_->check_group(g, what);
  return impl_->cids->space(g.id()).size();
}

unsigned runtime::task_cid(group g, const char* what) const {
  worker* w = worker::current_in(impl_.get());
  const detail::task_node* task = detail::current.task;
  if (w == nullptr || task == nullptr) {
    throw std::logic_error(std::string(what) +
                           ": the calling thread is not running a task of this runtime");
  }
  if (task->group != g.id()) {
    throw std::logic_error(std::string(what) + ": the calling task is in group " +
                           std::to_string(task->group) + ", not group " +
                           std::to_string(g.id()));
  }
  return w->cid(g.id());
}

std::size_t runtime::worker_count() const noexcept { return impl_->workers.size(); }

const urt::topology& runtime::topology() const noexcept { return impl_->topo; }

runtime_stats runtime::stats() const {
  runtime_stats s;
  s.workers.reserve(impl_->workers.size());
  for (auto& w : impl_->workers) s.workers.push_back(w->stats());
  return s;
}

}  // namespace urt
