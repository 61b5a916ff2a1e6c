// urt::runtime's life: building the shared mechanisms and the workers,
// stop() and its quiescence, and the runtime-wide queries (runtime_impl.hpp
// has the state they share with the spawn and group files).
//
// runtime_impl.hpp first: it includes urt/executor.hpp (Asio, then
// urt/runtime.hpp) before any standard header. <asio/detail/config.hpp>
// picks asio::aligned_new's allocator by whether a libstdc++ header came
// first, and every urt translation unit includes Asio first, so the library
// holds one definition of it (DESIGN.md, Asio's traps).
#include "runtime_impl.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

#include "current.hpp"
#include "messages.hpp"

namespace urt {

using detail::run_state;
using detail::worker;
using detail::bad_option;

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
                           std::to_string(max_workers) + ")" +
                           (options.cpus.empty() ? ": the topology has that many PUs; choose "
                                                   "some with runtime_options.cpus"
                                                 : ""));
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
  // The lock comes last, once every thread the runtime makes exists (the
  // workers, the call_rcu thread). Locked first, every later stack would
  // count against RLIMIT_MEMLOCK: a worker's thread could not start, and
  // liburcu, which cannot report a thread it fails to make, would abort
  // the process. Now what exists is locked (MCL_CURRENT, worker stacks
  // included) and what comes later too (MCL_FUTURE); a refusal (the
  // kernel checks the whole mapping against the limit before it applies
  // anything) leaves the process unlocked and no worker running.
  if (options.lock_memory == memory_lock::all && ::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    const int error = errno;
    shut_down(run_state::stopped);
    ::rlimit limit{};
    std::string why = "needs root or CAP_IPC_LOCK";
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      why += ", or an RLIMIT_MEMLOCK above the process's mapped memory; the limit is " +
             std::to_string(limit.rlim_cur) + " bytes";
    }
    throw std::system_error(error, std::generic_category(),
                            "runtime_options.lock_memory: mlockall refused (" + why + ")");
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

std::size_t runtime::worker_count() const noexcept { return impl_->workers.size(); }

const urt::topology& runtime::topology() const noexcept { return impl_->topo; }

runtime_stats runtime::stats() const {
  runtime_stats s;
  s.workers.reserve(impl_->workers.size());
  for (auto& w : impl_->workers) s.workers.push_back(w->stats());
  return s;
}


}  // namespace urt
