// urt/per_cid.hpp: one value per concurrency ID of a group, for per-worker
// style data (counters, caches, free lists) sized by how many workers run
// the group at once instead of by the worker count.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "urt/group.hpp"
#include "urt/runtime.hpp"

namespace urt {

/// One T per concurrency ID of group `g` (this_task::cid()), each on its
/// own cache line. A task of `g` reaches its ID's T with local() without
/// any lock: no other running task holds the same ID, and the ID's
/// hand-over between workers orders one holder's writes before the next
/// holder's reads. A T is created (value-initialized, one allocation) the
/// first time its ID is used, so memory follows the IDs actually used: a
/// pointer per possible ID plus a line per ID in use (bytes()), where a
/// per-worker array takes a line per worker.
///
/// for_each() visits the values from any thread; it races with tasks
/// writing them, so T must make that safe (atomics, or read after the
/// tasks are done). The per_cid must outlive the tasks that use it.
template <class T>
class per_cid {
 public:
  /// For group `g` (the default group when omitted) of `rt`. Throws
  /// std::invalid_argument for a group of another runtime.
  explicit per_cid(const runtime& rt, group g = {})
      : rt_(&rt),
        group_(g),
        capacity_(rt.cid_space_size(g, "urt::per_cid")),
        slots_(std::make_unique<std::atomic<slot*>[]>(capacity_)) {
    for (std::size_t i = 0; i < capacity_; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  }
  ~per_cid() {
    for (std::size_t i = 0; i < capacity_; ++i) delete slots_[i].load(std::memory_order_relaxed);
  }
  per_cid(const per_cid&) = delete;
  per_cid& operator=(const per_cid&) = delete;

  /// The running task's T. Throws std::logic_error unless the caller is a
  /// task of the group, in its runtime.
  T& local() {
    const unsigned id = rt_->task_cid(group_, "urt::per_cid::local");
    // Only the holder of `id` creates its slot, and holders of one ID are
    // ordered by the ID's hand-over: the load below sees the slot an
    // earlier holder created. Acquire/release also pair it with for_each().
    slot* s = slots_[id].load(std::memory_order_acquire);
    if (s == nullptr) {
      s = new slot{};
      slots_[id].store(s, std::memory_order_release);  // pairs with the acquire loads here and in for_each()
      used_.fetch_add(1, std::memory_order_relaxed);
    }
    return s->value;
  }

  /// Calls f(id, value) for every ID used so far, in ID order.
  template <class F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slot* s = slots_[i].load(std::memory_order_acquire)) f(static_cast<unsigned>(i), s->value);
    }
  }
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (const slot* s = slots_[i].load(std::memory_order_acquire)) {
        f(static_cast<unsigned>(i), std::as_const(s->value));
      }
    }
  }

  /// The most IDs the group can have (the runtime's worker count).
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// IDs whose T exists (used at least once).
  [[nodiscard]] std::size_t size() const noexcept { return used_.load(std::memory_order_relaxed); }
  /// Memory held: the pointer table and the values' lines.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return capacity_ * sizeof(std::atomic<slot*>) + size() * sizeof(slot);
  }
  [[nodiscard]] group owner_group() const noexcept { return group_; }

 private:
  static constexpr std::size_t line = 64;
  struct alignas(line) slot {
    T value{};
  };

  const runtime* rt_;
  group group_;
  std::size_t capacity_;
  std::unique_ptr<std::atomic<slot*>[]> slots_;
  std::atomic<std::size_t> used_{0};
};

}  // namespace urt
