// urt/executor.hpp: urt tasks as an Asio executor, for asio::post,
// dispatch, defer, co_spawn, bind_executor and I/O objects.
//
//   urt::runtime rt;
//   urt::executor ex = rt.executor({.priority = 80});
//   asio::post(ex, [] { /* a task at priority 80 */ });
//   auto low = asio::require(ex, urt::priority(10));    // the same, at 10
//   int p = asio::query(low, urt::priority);             // 10
//   asio::co_spawn(ex, session(), asio::detached);       // a coroutine at 80
//
// Every function object an executor is given becomes one urt task with the
// executor's priority, affinity and group (runtime::spawn): it runs in
// strict priority order with every other task of its worker. post and
// defer never run it inline; dispatch runs it inline only when called from
// inside a task of the same runtime, on a worker the affinity allows, at
// the same priority and in the same group (anything else could break the
// priority order or the affinity), and otherwise spawns it. post and
// dispatch place the task as spawn does (maybe on an idle worker, which
// they wake); defer (relationship.continuation: the caller is about to
// return) from a task on a worker the affinity allows, at the task's
// priority or below, queues it on that worker, which runs it next unless
// something more urgent waits there,
// as Asio's own schedulers keep continuations on the calling thread.
//
// Worker-owned I/O: an executor's execution context (asio::query(ex,
// asio::execution::context)) is the io_context of one worker, its home: the
// calling worker when rt.executor() is called from a task on a worker the
// affinity allows, else the lowest worker the affinity allows. Sockets and
// timers made with the executor register with that worker's reactor, their
// completions are delivered on that worker, and each completion handler
// runs as a task of the handler's executor. The worker takes completions
// in at its scheduling points (runtime_options::io_poll_interval), so one
// that arrives while a task runs waits for a scheduling point, never for
// the tasks queued behind it. I/O objects may be used from any thread, and
// must be destroyed before the runtime (as with any io_context). Post work
// through the executor, not to the io_context itself: a worker with no I/O
// outstanding does not wait in its reactor, so a handler posted straight
// to the context runs only once some executor has I/O on that worker.
//
// Coroutines keep their priority across suspensions when their awaitable
// names the executor type: urt::awaitable<T> (= asio::awaitable<T,
// urt::executor>) with urt::use_awaitable, and urt::yield() as a
// scheduling point. asio::any_io_executor (the default of asio::awaitable)
// does not carry the priority property: a coroutine spawned through it
// resumes at a priority of Asio's choosing.
//
// Errors: urt::priority(p) with p outside 0..99, and rt.executor() with a
// bad spec, throw std::invalid_argument naming the value; rt.executor()
// throws urt::runtime_stopped once stop() has begun. Executing never
// throws runtime_stopped: from outside the runtime's tasks, once stop()
// has begun, the function object is destroyed unrun on the calling thread
// (tasks of the runtime, which stop(drain) waits for, still execute), as
// Asio destroys the handlers of a stopped io_context. Asio executes from
// places where an exception could only end the process (a suspended
// coroutine's destructor posts the frame's destruction to its executor;
// co_spawn does it while unwinding); runtime::spawn, the native API, does
// throw. Once stop() begins, I/O completions are no longer delivered:
// their handlers are destroyed unrun too.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/defer.hpp>
#include <asio/execution.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "urt/priority.hpp"
#include "urt/runtime.hpp"
#include "urt/worker_set.hpp"

namespace urt {

/// The task-priority property of urt::executor (an Asio custom property):
/// asio::require(ex, urt::priority(80)) and asio::query(ex, urt::priority).
struct priority_property {
  template <class T>
  static constexpr bool is_applicable_property_v = asio::execution::is_executor<T>::value;
  static constexpr bool is_requirable = true;
  static constexpr bool is_preferable = true;
  using polymorphic_query_result_type = priority_t;

  /// The property carrying level `p`; std::invalid_argument unless 0..99.
  [[nodiscard]] priority_property operator()(priority_t p) const {
    if (!is_valid_priority(p)) {
      throw std::invalid_argument("urt::priority: " + std::to_string(p) + " is outside " +
                                  std::to_string(priority_normal) + ".." +
                                  std::to_string(priority_max));
    }
    priority_property q;
    q.level = p;
    return q;
  }
  /// The level required (-1 in the query tag urt::priority itself). Not
  /// named `value`: Asio probes Property::value() for static queries.
  priority_t level = -1;
};
inline constexpr priority_property priority{};

/// An Asio standard executor (asio::execution::executor) that runs function
/// objects as urt tasks. Cheap to copy (three words); a plain value type.
/// Made by runtime::executor(); valid while its runtime exists. As for an
/// io_context's executors, that includes destroying it: a tracked copy
/// (outstanding_work.tracked, e.g. inside asio::executor_work_guard)
/// counts itself out of its runtime when destroyed, so destroy such copies
/// before the runtime. Outstanding work does not hold stop() back:
/// stop(drain) waits for accepted tasks, not for work guards.
class executor {
 public:
  executor(const executor& o) noexcept
      : rt_(o.rt_), affinity_(o.affinity_), home_(o.home_), priority_(o.priority_),
        group_(o.group_), flags_(o.flags_) {
    if (tracked()) rt_->executor_work(home_, +1);
  }
  executor& operator=(const executor& o) noexcept {
    if (this != &o) {
      executor copy(o);
      swap(copy);
    }
    return *this;
  }
  executor(executor&& o) noexcept
      : rt_(o.rt_), affinity_(o.affinity_), home_(o.home_), priority_(o.priority_),
        group_(o.group_), flags_(std::exchange(o.flags_, std::uint8_t{0})) {}
  executor& operator=(executor&& o) noexcept {
    if (this != &o) {
      executor moved(std::move(o));
      swap(moved);
    }
    return *this;
  }
  ~executor() {
    if (tracked()) rt_->executor_work(home_, -1);
  }

  /// The task priority of the tasks it makes (0..99).
  [[nodiscard]] priority_t priority_level() const noexcept { return priority_; }
  /// The worker whose io_context is its execution context.
  [[nodiscard]] unsigned home_worker() const noexcept { return home_; }
  /// The workers its tasks may run on; nullptr: any.
  [[nodiscard]] const worker_set* affinity() const noexcept { return affinity_; }
  /// The runtime it spawns into.
  [[nodiscard]] urt::runtime& runtime() const noexcept { return *rt_; }

  // --- asio::require / asio::prefer -------------------------------------
  [[nodiscard]] executor require(const priority_property& p) const {
    if (!is_valid_priority(p.level)) {
      throw std::invalid_argument("asio::require(urt::executor, urt::priority): level " +
                                  std::to_string(p.level) + " is outside " +
                                  std::to_string(priority_normal) + ".." +
                                  std::to_string(priority_max) + " (use urt::priority(p))");
    }
    executor e(*this);
    e.priority_ = static_cast<std::uint8_t>(p.level);
    return e;
  }
  [[nodiscard]] executor require(asio::execution::blocking_t::possibly_t) const noexcept {
    return with(never_flag, false);
  }
  [[nodiscard]] executor require(asio::execution::blocking_t::never_t) const noexcept {
    return with(never_flag, true);
  }
  [[nodiscard]] executor require(asio::execution::relationship_t::fork_t) const noexcept {
    return with(continuation_flag, false);
  }
  [[nodiscard]] executor require(asio::execution::relationship_t::continuation_t) const noexcept {
    return with(continuation_flag, true);
  }
  [[nodiscard]] executor require(asio::execution::outstanding_work_t::tracked_t) const noexcept {
    return with(tracked_flag, true);
  }
  [[nodiscard]] executor require(asio::execution::outstanding_work_t::untracked_t) const noexcept {
    return with(tracked_flag, false);
  }
  template <class Alloc>
  [[nodiscard]] executor require(const asio::execution::allocator_t<Alloc>&) const noexcept {
    return *this;  // task nodes come from urt's own pool
  }

  // --- asio::query ------------------------------------------------------
  [[nodiscard]] priority_t query(const priority_property&) const noexcept { return priority_; }
  [[nodiscard]] asio::io_context& query(asio::execution::context_t) const noexcept {
    return rt_->executor_context(home_);
  }
  [[nodiscard]] asio::execution::blocking_t query(asio::execution::blocking_t) const noexcept {
    return (flags_ & never_flag) != 0 ? asio::execution::blocking_t(asio::execution::blocking.never)
                                      : asio::execution::blocking_t(asio::execution::blocking.possibly);
  }
  [[nodiscard]] asio::execution::relationship_t query(
      asio::execution::relationship_t) const noexcept {
    return (flags_ & continuation_flag) != 0
               ? asio::execution::relationship_t(asio::execution::relationship.continuation)
               : asio::execution::relationship_t(asio::execution::relationship.fork);
  }
  [[nodiscard]] asio::execution::outstanding_work_t query(
      asio::execution::outstanding_work_t) const noexcept {
    return tracked() ? asio::execution::outstanding_work_t(asio::execution::outstanding_work.tracked)
                     : asio::execution::outstanding_work_t(asio::execution::outstanding_work.untracked);
  }
  static constexpr asio::execution::mapping_t query(asio::execution::mapping_t) noexcept {
    return asio::execution::mapping.thread;
  }
  template <class Alloc>
  [[nodiscard]] std::allocator<void> query(const asio::execution::allocator_t<Alloc>&) const noexcept {
    return {};
  }

  /// Runs `f` as a task (see the top of this file for when dispatch runs it
  /// inline). No heap allocation for function objects of up to
  /// detail::inline_task_bytes, as runtime::spawn.
  template <class F>
  void execute(F&& f) const {
    using fn_t = std::decay_t<F>;
    if ((flags_ & never_flag) == 0 && rt_->executor_may_inline(priority_, affinity_, group_)) {
      fn_t fn(std::forward<F>(f));
      fn();
      return;
    }
    rt_->executor_spawn(priority_, affinity_, group_,
                        (flags_ & continuation_flag) != 0 ? runtime::relation::continuation
                                                          : runtime::relation::fork,
                        std::forward<F>(f));
  }

  friend bool operator==(const executor& a, const executor& b) noexcept {
    return a.rt_ == b.rt_ && a.affinity_ == b.affinity_ && a.home_ == b.home_ &&
           a.priority_ == b.priority_ && a.group_ == b.group_ &&
           ((a.flags_ ^ b.flags_) & (never_flag | continuation_flag)) == 0;
  }
  friend bool operator!=(const executor& a, const executor& b) noexcept { return !(a == b); }

 private:
  friend class urt::runtime;
  static constexpr std::uint8_t never_flag = 1;         // blocking.never
  static constexpr std::uint8_t continuation_flag = 2;  // relationship.continuation
  static constexpr std::uint8_t tracked_flag = 4;       // outstanding_work.tracked

  executor(urt::runtime* rt, const worker_set* affinity, unsigned home, priority_t p,
           unsigned group) noexcept
      : rt_(rt), affinity_(affinity), home_(home), priority_(static_cast<std::uint8_t>(p)),
        group_(static_cast<std::uint8_t>(group)) {}

  [[nodiscard]] bool tracked() const noexcept { return (flags_ & tracked_flag) != 0; }
  [[nodiscard]] executor with(std::uint8_t flag, bool on) const noexcept {
    executor e(*this);
    const bool was = e.tracked();
    e.flags_ = static_cast<std::uint8_t>(on ? (e.flags_ | flag) : (e.flags_ & ~flag));
    if (was != e.tracked()) rt_->executor_work(home_, e.tracked() ? +1 : -1);
    return e;
  }
  void swap(executor& o) noexcept {
    std::swap(rt_, o.rt_);
    std::swap(affinity_, o.affinity_);
    std::swap(home_, o.home_);
    std::swap(priority_, o.priority_);
    std::swap(group_, o.group_);
    std::swap(flags_, o.flags_);
  }

  urt::runtime* rt_;
  const worker_set* affinity_;  // interned by the runtime; nullptr: any worker
  std::uint32_t home_;
  std::uint8_t priority_;
  std::uint8_t group_;
  std::uint8_t flags_ = 0;
};

/// A type-erased executor that keeps the priority property: Asio's
/// any_io_executor with urt::priority_property added, for code that wants
/// one executor type for every urt executor, whatever its properties, and
/// strands over them (asio::awaitable<T, urt::any_executor>, I/O objects).
/// The priority property is required, so it holds no executor of another
/// context (an io_context's, a thread_pool's): asio::any_io_executor does.
using any_executor = asio::execution::any_executor<
    asio::execution::context_as_t<asio::execution_context&>,
    asio::execution::blocking_t::never_t,
    asio::execution::prefer_only<asio::execution::blocking_t::possibly_t>,
    asio::execution::prefer_only<asio::execution::outstanding_work_t::tracked_t>,
    asio::execution::prefer_only<asio::execution::outstanding_work_t::untracked_t>,
    asio::execution::prefer_only<asio::execution::relationship_t::fork_t>,
    asio::execution::prefer_only<asio::execution::relationship_t::continuation_t>,
    priority_property>;

#if defined(ASIO_HAS_CO_AWAIT)
// Asio enables co_await where the compiler has standard coroutines in the
// form it detects (GCC 10 and later in C++20; Debian 12's clang 14 not,
// since it needs -fcoroutines-ts and <experimental/coroutine>): elsewhere
// urt::executor works without urt::awaitable, use_awaitable and yield().

/// A coroutine that keeps its executor (and so its priority) across
/// co_await: co_spawn(ex, f, token) with f returning urt::awaitable<T>.
template <class T = void>
using awaitable = asio::awaitable<T, executor>;
/// The completion token that suspends a urt::awaitable coroutine.
inline constexpr asio::use_awaitable_t<executor> use_awaitable{};

/// A scheduling point for a coroutine: `co_await urt::yield();` spawns its
/// continuation as a task at its own priority, queued on its own worker
/// (defer: a continuation), so every task already queued there at that
/// priority or above runs first (sched_yield's rule) and a more urgent one
/// that was waiting is not held up. With nothing queued it resumes at once
/// on the same worker; behind a more urgent task, push migration may move
/// it to a worker the affinity allows that runs lower. (A post would be
/// placed: with an idle worker about, every yield would hop there and wake
/// it, about 10x the cost.)
[[nodiscard]] inline awaitable<void> yield() {
  return asio::defer(asio::use_awaitable_t<executor>{});
}
#endif  // ASIO_HAS_CO_AWAIT

/// I/O objects whose operations complete through urt::executor.
namespace net {
using tcp_socket = asio::basic_stream_socket<asio::ip::tcp, executor>;
using tcp_acceptor = asio::basic_socket_acceptor<asio::ip::tcp, executor>;
using steady_timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                                asio::wait_traits<std::chrono::steady_clock>, executor>;
}  // namespace net

}  // namespace urt
