// group_budgets: one worker's FIFO budgets of the task groups that have one
// (urt::group_budget, the kernel's RT_GROUP_SCHED per CPU). Each budgeted
// group has a strict `bandwidth` of its own on the worker: the time the
// worker runs a FIFO task of the group is charged to it, and once the group
// has spent its runtime in its period its FIFO tasks are held back on this
// worker until that period ends; they stay pushable, so a worker where the
// group has budget left may take them. Other groups' tasks run meanwhile.
//
// While a group is held its queued tasks still count in the worker's
// published level (cpupri shows the most urgent queued task, held or not):
// placement may see the worker busier than it is until the period ends.
//
// Concurrency: owner only, except counters(), which any thread may read:
// a group's budget object is created once by the owner, published with a
// release store and never freed before the worker.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "bandwidth.hpp"
#include "bandwidth_table.hpp"
#include "urt/group.hpp"

namespace urt::detail {

struct task_node;

class group_budgets {
 public:
  group_budgets() = default;
  ~group_budgets();
  group_budgets(const group_budgets&) = delete;
  group_budgets& operator=(const group_budgets&) = delete;

  /// Owner: the groups of a new parameter block, from `now` on. Only the
  /// budgets that changed are reconfigured (a new period, nothing used, no
  /// hold); a removed one is suspended, its time and hold counted to `now`.
  void configure(const std::vector<bandwidth_table::block::group_entry>& groups,
                 clock::time_point now);
  /// Whether any group has a budget (then every scheduling point looks).
  [[nodiscard]] bool any() const noexcept { return !budgeted_.empty(); }
  /// Owner, at a scheduling point: charges the time since the last one,
  /// rolls periods, decides holds. Returns whether any group is held.
  bool look(clock::time_point now) noexcept;
  /// Owner: stop() began: every hold ends at `now` (counted), and nothing
  /// is held back any more.
  void release_holds(clock::time_point now) noexcept;
  /// Whether some group is held back here (as of the last look()).
  [[nodiscard]] bool any_held() const noexcept { return any_held_; }
  /// Whether `group`'s FIFO tasks are held back here (after look()).
  [[nodiscard]] bool held(unsigned group) const noexcept { return held_[group]; }
  /// Whether a task may be picked: normal tasks always, FIFO ones unless
  /// their group is held.
  [[nodiscard]] bool allowed(const task_node& node) const noexcept;
  /// Owner: what the pick took (nullptr: nothing), charged from now on.
  void picked(const task_node* node) noexcept;
  /// When the first held group's period ends (time_point::max(): none held).
  [[nodiscard]] clock::time_point next_end() const noexcept;
  /// Any thread: group `g`'s counters on this worker, or nullptr if it never
  /// had a budget here.
  [[nodiscard]] const bandwidth::counters* counters(unsigned g) const noexcept;

 private:
  std::array<std::atomic<bandwidth*>, max_groups> budgets_{};  // created once, owner-written
  std::array<bool, max_groups> held_{};
  std::vector<unsigned> budgeted_;  // ids with a budget now
  bool any_held_ = false;
};

}  // namespace urt::detail
