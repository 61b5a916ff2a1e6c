// A runtime's task groups: making them, their budgets and the runtime-wide
// one (set_bandwidth), their stats, and the calling task's concurrency ID
// (runtime_impl.hpp has the state they share).
//
// runtime_impl.hpp first: it includes urt/executor.hpp (Asio, then
// urt/runtime.hpp) before any standard header. <asio/detail/config.hpp>
// picks asio::aligned_new's allocator by whether a libstdc++ header came
// first, and every urt translation unit includes Asio first, so the library
// holds one definition of it (DESIGN.md, Asio's traps).
#include "runtime_impl.hpp"

#include <string>

#include "current.hpp"
#include "hot.hpp"

namespace urt {

using detail::run_state;
using detail::worker;

URT_HOT void runtime::impl::check_group(const group& g, const char* what,
                                        const char* suffix) const {
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
                                std::to_string(opts.name.size()) + " bytes exceed " +
                                std::to_string(max_name));
  }
  if (opts.budget) detail::validate_group_budget(*opts.budget, "runtime::make_group: group_options.budget");
  // Acquire: pairs with stop()'s seq_cst store of the state. Only a
  // refusal: a group made while stop() begins is harmless (no task of it
  // can be spawned once the spawn checks see the stop).
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
  // Acquire: as in make_group(). A budget set while stop() begins is
  // harmless: stopping workers hold nothing back (consult_budgets()).
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
  // Acquire: as in set_bandwidth(group, ...).
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


}  // namespace urt
