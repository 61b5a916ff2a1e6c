// urt/group.hpp: task groups and their FIFO budgets.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace urt {

/// The most groups a runtime has, its default group included.
inline constexpr unsigned max_groups = 256;

/// A group's own FIFO budget on every worker, as the kernel's
/// RT_GROUP_SCHED has it per CPU (not pooled across workers): the group's
/// FIFO tasks (priorities 1..99) run at most `runtime` of every `period`
/// on each worker; then they wait on that worker until its period ends (or
/// are pushed to a worker where the group has budget left). Its normal
/// tasks are not limited. 0 < runtime <= period <= bandwidth_options::max_period.
struct group_budget {
  std::chrono::nanoseconds runtime{0};
  std::chrono::nanoseconds period{0};
};

/// What runtime::make_group() builds a group from.
struct group_options {
  /// For stats; at most 64 bytes (UTF-8 counts its bytes).
  std::string name{};
  /// nullopt: only the runtime-wide budget (runtime_options::bandwidth)
  /// limits the group's tasks.
  std::optional<group_budget> budget = std::nullopt;
};

/// A handle to a task group of one runtime: a small value, cheap to copy.
/// The default-constructed group is every runtime's default group (id 0),
/// which has no budget of its own unless set_bandwidth(group{}, budget)
/// gives it one (it then limits the tasks of no other group).
/// task_spec::group puts a task in a group.
class group {
 public:
  constexpr group() noexcept = default;
  /// 0 for the default group; ids are dense in creation order.
  [[nodiscard]] constexpr unsigned id() const noexcept { return id_; }
  friend constexpr bool operator==(const group&, const group&) noexcept = default;

 private:
  friend class runtime;
  constexpr group(const void* owner, unsigned id) noexcept : owner_(owner), id_(id) {}
  const void* owner_ = nullptr;  // the runtime that made it; nullptr: the default group
  unsigned id_ = 0;
};

/// Buckets of group_stats::cid_step_ns: a compaction step that took less
/// than cid_step_bounds_ns[i] counts in bucket i; the last bucket counts
/// the rest.
inline constexpr unsigned cid_step_buckets = 8;
inline constexpr std::array<std::uint64_t, cid_step_buckets - 1> cid_step_bounds_ns{
    250, 500, 1'000, 2'000, 4'000, 8'000, 16'000};

/// A snapshot of one group's counters, summed over the workers.
struct group_stats {
  unsigned id = 0;
  std::string name;
  std::optional<group_budget> budget;
  // Its budget (group_options::budget), summed over the workers. A group's
  // time is measured only while it has a budget: a worker reads the clock at
  // a scheduling point only where a budget can change the pick, so a group
  // without one costs nothing and shows 0 here (worker_stats has the
  // runtime-wide split).
  std::uint64_t fifo_ns = 0;          ///< its FIFO tasks ran this long
  std::uint64_t normal_ns = 0;        ///< its normal tasks (priority 0) ran this long
  std::uint64_t throttle_events = 0;  ///< times its FIFO tasks were held back on a worker
  /// Time they were held back, summed over workers (counted as
  /// worker_stats::throttled_ns is).
  std::uint64_t throttled_ns = 0;
  std::uint64_t server_slices = 0;    ///< its normal tasks picked while its FIFO was held
  std::uint64_t overrun_ns = 0;       ///< FIFO time past its budget by tasks picked inside it
  std::uint64_t overrun_events = 0;   ///< its tasks that ran past its budget

  // Concurrency IDs (this_task::cid(), runtime_options::cid_mode).
  std::uint64_t cids_allocated = 0;   ///< IDs taken from the group's free pool
  std::uint64_t cids_reclaimed = 0;   ///< cached IDs taken back by compaction steps
  std::uint64_t cids_released = 0;    ///< IDs given back by their workers (ownership, moves down)
  unsigned cids_in_use = 0;           ///< IDs held now (active or cached)
  int highest_cid = -1;               ///< the highest ID held now; -1: none
  std::uint64_t cid_steps = 0;        ///< compaction steps that visited workers
  /// Those steps by their cost (one clock read included), cid_step_bounds_ns.
  std::array<std::uint64_t, cid_step_buckets> cid_step_ns{};
};

}  // namespace urt
