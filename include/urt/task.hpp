// urt/task.hpp: what a task is (its spec) and what a running task can ask.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "urt/group.hpp"
#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/timer.hpp"

namespace urt {

/// How a task is to be scheduled. Use designated initializers:
/// `urt::task_spec{.priority = 80, .affinity = urt::worker_set{0, 1}}`.
struct task_spec {
  /// 0 = normal class, 1..99 = FIFO levels (higher runs first).
  priority_t priority = priority_normal;
  /// Workers the task may run on; nullopt means any worker. An engaged but
  /// empty set, or one naming a worker that does not exist, is rejected.
  std::optional<worker_set> affinity = std::nullopt;
  /// The group the task belongs to (runtime::make_group); the default group
  /// otherwise. A group of another runtime is rejected.
  urt::group group{};
};

/// Questions a running task may ask about itself. Each throws
/// std::logic_error when the calling thread is not running an urt task.
namespace this_task {
/// True when the calling thread is a worker running a task.
[[nodiscard]] bool running() noexcept;
/// The id of the worker running the calling task.
[[nodiscard]] unsigned worker_id();
/// The priority the calling task was spawned with.
[[nodiscard]] priority_t priority();
/// The release time of the calling task: the deadline given to spawn_at,
/// or start + k * period for release k of every(); clock::time_point{}
/// for a task spawned without a release time.
[[nodiscard]] clock::time_point release_time();
/// The calling task's concurrency ID in its group: no other worker running
/// a task of the same group holds it while this task runs, and it is below
/// the number of workers. A worker keeps it across consecutive tasks of the
/// group (then this is two loads); between tasks it may change
/// (runtime_options::cid_mode). Index per-ID data with it (urt::per_cid).
[[nodiscard]] unsigned cid();
}  // namespace this_task

/// A scheduling point inside a long-running task: takes in the work that
/// reached the worker meanwhile and returns true when a task more urgent
/// than the caller is waiting on this worker, so the caller can return (or
/// spawn its continuation) and let it run. Tasks are never interrupted;
/// this is how a long task stays preemptible. Returns false outside a task.
/// Call it only from the task's own thread.
bool preempt_point() noexcept;

namespace detail {

/// Bytes of callable stored inline in a pooled task node. A bigger callable
/// (or one needing stricter alignment) costs one heap allocation per spawn.
/// 64 bytes fit a lambda capturing a std::string, a shared_ptr and a few
/// pointers.
inline constexpr std::size_t inline_task_bytes = 64;

/// The type-erased callable inside a task node. Filled once by spawn, then
/// consumed exactly once: by run (invoke, then destroy) or by drop (destroy
/// only, for a task cancelled at shutdown).
struct task_payload {
  void (*run_fn)(task_payload&) = nullptr;
  void (*drop_fn)(task_payload&) noexcept = nullptr;
  alignas(std::max_align_t) std::byte storage[inline_task_bytes];

  /// For a periodic series: run_fn invokes without destroying; drop_fn
  /// destroys once the series ends.
  template <class F>
  void emplace_repeating(F&& fn) {
    using fn_t = std::decay_t<F>;
    if constexpr (sizeof(fn_t) <= inline_task_bytes && alignof(fn_t) <= alignof(std::max_align_t)) {
      ::new (static_cast<void*>(storage)) fn_t(std::forward<F>(fn));
      run_fn = [](task_payload& p) { (*std::launder(reinterpret_cast<fn_t*>(p.storage)))(); };
      drop_fn = [](task_payload& p) noexcept {
        std::launder(reinterpret_cast<fn_t*>(p.storage))->~fn_t();
      };
    } else {
      auto* heap = new fn_t(std::forward<F>(fn));
      ::new (static_cast<void*>(storage)) fn_t*(heap);
      run_fn = [](task_payload& p) { (**std::launder(reinterpret_cast<fn_t**>(p.storage)))(); };
      drop_fn = [](task_payload& p) noexcept {
        delete *std::launder(reinterpret_cast<fn_t**>(p.storage));
      };
    }
  }

  template <class F>
  void emplace(F&& fn) {
    using fn_t = std::decay_t<F>;
    if constexpr (sizeof(fn_t) <= inline_task_bytes && alignof(fn_t) <= alignof(std::max_align_t)) {
      ::new (static_cast<void*>(storage)) fn_t(std::forward<F>(fn));
      run_fn = [](task_payload& p) {
        fn_t& f = *std::launder(reinterpret_cast<fn_t*>(p.storage));
        struct destroy_after {
          fn_t& f;
          ~destroy_after() { f.~fn_t(); }
        } guard{f};
        f();
      };
      drop_fn = [](task_payload& p) noexcept {
        std::launder(reinterpret_cast<fn_t*>(p.storage))->~fn_t();
      };
    } else {
      auto* heap = new fn_t(std::forward<F>(fn));
      ::new (static_cast<void*>(storage)) fn_t*(heap);
      run_fn = [](task_payload& p) {
        std::unique_ptr<fn_t> f(*std::launder(reinterpret_cast<fn_t**>(p.storage)));
        (*f)();
      };
      drop_fn = [](task_payload& p) noexcept {
        delete *std::launder(reinterpret_cast<fn_t**>(p.storage));
      };
    }
  }
};

}  // namespace detail
}  // namespace urt
