#include "group_budgets.hpp"

#include <algorithm>
#include <optional>

#include "task_node.hpp"

namespace urt::detail {

group_budgets::~group_budgets() {
  for (auto& b : budgets_) delete b.load(std::memory_order_relaxed);
}

void group_budgets::configure(const std::vector<bandwidth_table::block::group_entry>& groups,
                              clock::time_point now) {
  // A group's budget is touched only when it changed: a block is published
  // for any group's change and for make_group(), and a reconfigured budget
  // starts a new period with nothing used and no hold. Resetting them all
  // each time let a thread that adjusts one group (or makes groups) every
  // few milliseconds lift every other group's budget.
  std::array<bool, max_groups> was_budgeted{};
  for (const unsigned g : budgeted_) was_budgeted[g] = true;
  budgeted_.clear();
  for (unsigned g = 0; g < max_groups; ++g) {
    bandwidth* b = budgets_[g].load(std::memory_order_relaxed);
    const std::optional<group_budget>* budget = g < groups.size() ? &groups[g].budget : nullptr;
    if (budget == nullptr || !budget->has_value()) {
      // Removed: charge it up to now and end its hold; a budget given back
      // later starts afresh (bandwidth::suspend()).
      if (was_budgeted[g]) b->suspend(now);
      held_[g] = false;
      continue;
    }
    const bandwidth_options opts{.mode = throttle_mode::strict,
                                 .runtime = (*budget)->runtime,
                                 .period = (*budget)->period};
    if (b == nullptr) {
      // Release: pairs with the acquire load in counters().
      budgets_[g].store(new bandwidth(opts, now), std::memory_order_release);
    } else if (!b->has(opts)) {
      b->configure(opts, now);
      held_[g] = false;  // a new configuration starts with the group's FIFO allowed
    }
    budgeted_.push_back(g);
  }
  any_held_ =
      std::any_of(budgeted_.begin(), budgeted_.end(), [this](unsigned g) { return held_[g]; });
}

void group_budgets::release_holds(clock::time_point now) noexcept {
  for (const unsigned g : budgeted_) {
    budgets_[g].load(std::memory_order_relaxed)->release(now);
    held_[g] = false;
  }
  any_held_ = false;
}

bool group_budgets::look(clock::time_point now) noexcept {
  bool any_held = false;
  for (const unsigned g : budgeted_) {
    bandwidth& b = *budgets_[g].load(std::memory_order_relaxed);
    b.tick(now);
    // Strict: decide() holds once the group's runtime is spent.
    held_[g] = b.decide(now, false) == bandwidth::allow::normal_only;
    any_held = any_held || held_[g];
  }
  any_held_ = any_held;
  return any_held;
}

bool group_budgets::allowed(const task_node& node) const noexcept {
  return node.priority == priority_normal || !held_[node.group];
}

void group_budgets::picked(const task_node* node) noexcept {
  // Each budget charges the time from now on to the class of what runs, as
  // far as its own group goes: the group's FIFO task (charged against its
  // budget), the group's normal task (counted, never held; a server slice
  // while the group's FIFO is held), or anything else (idle, for it).
  const unsigned now_running = node != nullptr ? node->group : max_groups;
  const run_class own =
      node != nullptr && node->priority == priority_normal ? run_class::normal : run_class::fifo;
  for (const unsigned g : budgeted_) {
    budgets_[g].load(std::memory_order_relaxed)->picked(g == now_running ? own : run_class::idle);
  }
}

clock::time_point group_budgets::next_end() const noexcept {
  clock::time_point first = clock::time_point::max();
  for (const unsigned g : budgeted_) {
    if (held_[g]) first = std::min(first, budgets_[g].load(std::memory_order_relaxed)->period_end());
  }
  return first;
}

const bandwidth::counters* group_budgets::counters(unsigned g) const noexcept {
  // Acquire: pairs with the release store in configure().
  const bandwidth* b = g < max_groups ? budgets_[g].load(std::memory_order_acquire) : nullptr;
  return b != nullptr ? &b->stats() : nullptr;
}

}  // namespace urt::detail
