// bandwidth_table: the runtime's bandwidth parameters, changed live from any
// thread and read by the workers without a lock, through liburcu's QSBR.
//
// A parameter block is immutable once published. A writer (set_bandwidth,
// any thread; writers are serialised by a mutex) builds a new block,
// publishes it with one pointer exchange and retires the old one with
// call_rcu on the process's default call_rcu thread, which frees it after a
// grace period: once every registered thread (every runtime's workers)
// has passed a quiescent state (each scheduling point) or been offline
// (parked). A worker reads the pointer at a scheduling point and uses the
// block until its next one, so it never sees a torn or freed block. The
// destructor waits for no grace period: only this runtime's workers read
// its blocks, and they are gone by then.
//
// Concurrency:
//   | may run with ->  | read (worker)   | publish (writer)                |
//   |------------------|-----------------|---------------------------------|
//   | read (worker)    | yes             | yes: old or new block, whole    |
//   | publish (writer) | yes             | serialised by the writer mutex  |
// Progress: read is wait-free (one acquire load); publish takes the writer
// mutex and allocates; reclamation runs on the call_rcu thread, which
// sleeps while nothing is retired (an idle runtime has no thread awake).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include <optional>
#include <string>
#include <vector>

#include "function_ref.hpp"
#include "urt/group.hpp"
#include "urt/options.hpp"

struct call_rcu_data;

namespace urt::detail {

class bandwidth_table {
 public:
  /// One published set of parameters.
  struct block;

  /// Publishes `initial` (validated) and makes sure the process's default
  /// call_rcu thread, which frees retired blocks, exists
  /// (std::system_error when it cannot be created). Call from the thread
  /// that builds the runtime: the helper thread is created with every
  /// signal blocked, and it inherits that thread's CPUs and policy.
  explicit bandwidth_table(const bandwidth_options& initial);
  /// Frees the current block; blocks retired earlier are freed by the
  /// call_rcu thread after their grace periods. Only once no worker reads
  /// any more. Waits for no grace period, so for no task of any runtime.
  ~bandwidth_table();
  bandwidth_table(const bandwidth_table&) = delete;
  bandwidth_table& operator=(const bandwidth_table&) = delete;

  /// Any thread: publishes a copy of the current block as `change` edits
  /// it (its arguments validated by the caller); workers see it at their
  /// next scheduling point. `change` runs under the writer mutex.
  void update(function_ref<void(block&)> change);

  /// Any thread: calls `look` with the current block under the writer
  /// mutex, so that it cannot be retired meanwhile (for threads that are
  /// not registered with QSBR).
  void inspect(function_ref<void(const block&)> look) const;

  /// A registered worker, between two quiescent states: the current block.
  /// Acquire: pairs with the release exchange in publish().
  [[nodiscard]] const block* read() const noexcept { return current_.load(std::memory_order_acquire); }

  /// Any thread, the worker even while offline (parking): the version of
  /// the block published last. A worker on its way to park compares it with
  /// the version it follows after announcing the park, and update()'s
  /// caller rings every worker after publishing (the doorbell's Dekker pair,
  /// doorbell.hpp): a change never leaves a worker asleep on the old block.
  /// Acquire: pairs with update()'s release store (the doorbell's fences
  /// order the wake check itself).
  [[nodiscard]] std::uint64_t version() const noexcept {
    return version_.load(std::memory_order_acquire);
  }

  /// For a worker's own thread: routes its call_rcu callbacks (if any) to
  /// that call_rcu thread (a worker never makes one lazily).
  void adopt_call_rcu_thread() const noexcept;

 private:
  void retire(const block* old) noexcept;

  std::atomic<const block*> current_;
  std::atomic<std::uint64_t> version_{0};  // current_'s version, readable without a grace period
  mutable std::mutex writer_;
  ::call_rcu_data* reclaimer_ = nullptr;
};

struct bandwidth_table::block {
  /// One task group: id = its index; entry 0 is the default group.
  struct group_entry {
    std::string name;
    std::optional<group_budget> budget;
  };
  bandwidth_options runtime_wide;
  std::vector<group_entry> groups;  // never empty
  std::uint64_t version = 0;        // increases with every publication
};

/// Whether `opts` is valid; throws std::invalid_argument naming
/// `<prefix>.mode`, `.runtime` or `.period` and the value.
void validate_bandwidth(const bandwidth_options& opts, const char* prefix);
/// The same for a group's budget: `<prefix>.runtime`, `.period`.
void validate_group_budget(const group_budget& budget, const char* prefix);

}  // namespace urt::detail
