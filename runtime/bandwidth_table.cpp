#include "bandwidth_table.hpp"

#include "messages.hpp"
#include "qsbr.hpp"
#include "signal_mask.hpp"

#include <urcu/urcu-qsbr.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace urt::detail {
namespace {

// A published block and the rcu_head that retires it. The head comes first
// in the allocation so that the callback finds the whole thing.
struct node {
  rcu_head head{};
  bandwidth_table::block value;
};

node* node_of(const bandwidth_table::block* b) noexcept {
  return reinterpret_cast<node*>(reinterpret_cast<char*>(const_cast<bandwidth_table::block*>(b)) -
                                 offsetof(node, value));
}

void free_node(rcu_head* head) noexcept {
#if defined(__SANITIZE_THREAD__)
  // TSAN cannot see QSBR's grace period: the readers' quiescent states
  // release this address (qsbr.hpp), the free acquires it.
  __tsan_acquire(&qsbr::tsan_grace);
#endif
  delete reinterpret_cast<node*>(head);
}

}  // namespace

void validate_bandwidth(const bandwidth_options& b, const char* prefix) {
  const auto bad = [&](const char* field, const std::string& why) {
    throw std::invalid_argument(std::string(prefix) + "." + field + ": " + why);
  };
  if (b.mode != throttle_mode::off && b.mode != throttle_mode::deferred &&
      b.mode != throttle_mode::strict) {
    bad("mode", "value " + std::to_string(static_cast<int>(b.mode)) + " is not a throttle_mode");
  }
  if (b.period.count() <= 0) bad("period", ns_text(b.period) + " is not positive");
  if (b.period > bandwidth_options::max_period) {
    bad("period",
        ns_text(b.period) + " exceeds the maximum of " + ns_text(bandwidth_options::max_period));
  }
  if (b.runtime.count() < 0) bad("runtime", ns_text(b.runtime) + " is negative");
  if (b.runtime > b.period) {
    bad("runtime", ns_text(b.runtime) + " exceeds the period of " + ns_text(b.period));
  }
  // A strict budget of nothing would never run a FIFO task again, and
  // stop(drain) would wait for them forever.
  if (b.mode == throttle_mode::strict && b.runtime.count() == 0) {
    bad("runtime", "0ns under a strict budget would never run a FIFO task");
  }
}

void validate_group_budget(const group_budget& budget, const char* prefix) {
  // A group budget is always held strictly (group.hpp): the period and
  // range checks are the runtime-wide budget's, and a runtime of 0 is out
  // of its range, 0 < runtime <= period, as the group's own contract says.
  if (budget.period.count() > 0 && budget.runtime.count() == 0) {
    throw std::invalid_argument(std::string(prefix) +
                                ".runtime: 0ns is not in (0, period]: a group with no FIFO time "
                                "would never run a task");
  }
  validate_bandwidth({.mode = throttle_mode::strict, .runtime = budget.runtime, .period = budget.period},
                     prefix);
}

namespace {

// liburcu cannot report a call_rcu thread it fails to make: it aborts the
// process (urcu_die). Before the first runtime asks for the default one,
// a thread of our own is made and joined, so that a process at its thread
// limit (RLIMIT_NPROC, a cgroup's pids.max) gets an exception instead.
// Only a thread made elsewhere in the process between the two can still
// take the last slot. Once liburcu has the thread, no probe.
void ensure_thread_can_start() {
  static std::atomic<bool> made{false};
  // Relaxed: a second probe costs a thread, nothing else.
  if (made.load(std::memory_order_relaxed)) return;
  try {
    std::thread([] {}).join();
  } catch (const std::system_error& e) {
    throw std::system_error(e.code(),
                            "runtime: cannot start the call_rcu thread for bandwidth parameters "
                            "(the limit on threads or memory)");
  }
  made.store(true, std::memory_order_relaxed);
}

}  // namespace

bandwidth_table::bandwidth_table(const bandwidth_options& initial) {
  {
    // Retired blocks go to the process's default call_rcu thread, made
    // here if it does not exist yet, so that it is never made lazily by a
    // worker's call_rcu (it would inherit the worker's CPU and policy). It
    // inherits this thread's signal mask: block them all while it may be
    // created, so that it never takes the application's signals
    // (signal_mask.hpp). liburcu makes it without URCU_CALL_RCU_RT (which
    // polls every 10 ms for ever, 100 wake-ups a second of an idle
    // runtime): it sleeps on a futex while it has nothing to free; a
    // call_rcu() that finds it asleep wakes it (a system call), and once
    // woken it batches for 10 ms before it may sleep again, so callers make
    // at most about 100 such calls a second. The callers are
    // set_bandwidth(), make_group() and tasks retiring their own RCU data
    // (urt-kv's store), none on a worker's scheduling path.
    //
    // Not a call_rcu thread of the runtime's own: ending one at
    // destruction means waiting for its callbacks, each a grace period of
    // the process's one QSBR domain, and so for every task running in every
    // other runtime (a task of another runtime waiting for this one's end
    // deadlocked). The destructor waits for no grace period.
    const scoped_signal_block masked(all_signals());
    ensure_thread_can_start();
    reclaimer_ = urcu_qsbr_get_default_call_rcu_data();
  }
  if (reclaimer_ == nullptr) {
    throw std::system_error(ENOMEM, std::generic_category(),
                            "runtime: cannot create the call_rcu thread for bandwidth parameters");
  }
  auto* first = new node;
  first->value.runtime_wide = initial;
  first->value.groups.push_back({"default", std::nullopt});
  current_.store(&first->value, std::memory_order_relaxed);
}

bandwidth_table::~bandwidth_table() {
  // The workers, the only readers of these blocks, have exited: the
  // current block is freed now. Blocks retired earlier are freed by the
  // call_rcu thread after their grace periods; their callback touches
  // nothing but the block.
  delete node_of(current_.load(std::memory_order_relaxed));
}

void bandwidth_table::update(function_ref<void(block&)> change) {
  std::lock_guard lock(writer_);
  const block* old = current_.load(std::memory_order_relaxed);
  auto* next = new node;
  next->value = *old;
  try {
    change(next->value);
  } catch (...) {
    delete next;
    throw;
  }
  next->value.version = old->version + 1;
  // Release: pairs with the acquire load in read(); a reader that sees the
  // new block sees it whole.
  current_.store(&next->value, std::memory_order_release);
  // Release: a worker that sees the new version with an acquire load sees
  // the block's pointer too (the doorbell's fences order it for the wake
  // check; this makes a stale-pointer step impossible, not merely harmless).
  version_.store(next->value.version, std::memory_order_release);
  retire(old);
}

void bandwidth_table::inspect(function_ref<void(const block&)> look) const {
  std::lock_guard lock(writer_);
  look(*current_.load(std::memory_order_relaxed));
}

void bandwidth_table::retire(const block* old) noexcept {
  // Route the callback to the call_rcu thread made in the constructor, not
  // to one the calling thread would create lazily with its own policy.
  ::call_rcu_data* previous = urcu_qsbr_get_thread_call_rcu_data();
  urcu_qsbr_set_thread_call_rcu_data(reclaimer_);
  urcu_qsbr_call_rcu(&node_of(old)->head, free_node);
  urcu_qsbr_set_thread_call_rcu_data(previous);
}

void bandwidth_table::adopt_call_rcu_thread() const noexcept {
  urcu_qsbr_set_thread_call_rcu_data(reclaimer_);
}

}  // namespace urt::detail
