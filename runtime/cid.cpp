#include "cid.hpp"

#include <time.h>

#include <algorithm>
#include <bit>
#include <cassert>

#include "clock_now.hpp"
#include "spinlock.hpp"
#include "urt/timer.hpp"
#include "urt/worker_set.hpp"

namespace urt::detail {

std::int64_t cid_clock_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

cid_space::config cid_space::config_of(const runtime_options& o) noexcept {
  return {.mode = o.cid_mode,
          .idle_threshold_ns = o.cid_idle_threshold.count(),
          .batch = o.cid_scan_batch,
          .interval_ns = o.cid_scan_interval.count()};
}

cid_space::cid_space(unsigned workers, const config& cfg, std::int64_t now)
    : cfg_(cfg),
      workers_(workers),
      words_((workers + 63) / 64),
      slots_(std::make_unique<std::atomic<std::uint64_t>[]>(workers)),
      bits_(std::make_unique<std::atomic<std::uint64_t>[]>(words_)),
#ifndef NDEBUG
      holder_(std::make_unique<std::atomic<int>[]>(workers)),
#endif
      cursor_(workers),
      pass_start_(now) {
  assert(workers >= 1 && workers <= max_workers && cfg.batch >= 1);
  for (unsigned i = 0; i < workers_; ++i) slots_[i].store(pack(0, state_unset, 0), std::memory_order_relaxed);
  for (unsigned i = 0; i < words_; ++i) bits_[i].store(0, std::memory_order_relaxed);
  if (const unsigned tail = workers_ % 64; tail != 0) {
    // The bits past the last ID look taken, so allocation never finds them.
    bits_[words_ - 1].store(~std::uint64_t{0} << tail, std::memory_order_relaxed);
  }
#ifndef NDEBUG
  for (unsigned i = 0; i < workers_; ++i) holder_[i].store(-1, std::memory_order_relaxed);
#endif
}

cid_space::~cid_space() = default;

unsigned cid_space::allocate() noexcept {
  for (;;) {
    for (unsigned i = 0; i < words_; ++i) {
      std::uint64_t v = bits_[i].load(std::memory_order_relaxed);
      while (v != ~std::uint64_t{0}) {
        const auto b = static_cast<unsigned>(std::countr_one(v));  // the lowest free bit
        // Acquire: pairs with the release in free_id() that gave the ID
        // back, so its previous holder's writes under it happen before ours.
        if (bits_[i].compare_exchange_weak(v, v | (std::uint64_t{1} << b),
                                           std::memory_order_acquire, std::memory_order_relaxed)) {
          counters_.allocated.fetch_add(1, std::memory_order_relaxed);
          return i * 64 + b;
        }
      }
    }
    // Every ID is taken: one is between a reclaimer's CAS on its slot and
    // the clear of its bit (the caller holds none of this space, and every
    // other worker at most one). It is freed within a few instructions.
    cpu_relax();
  }
}

void cid_space::free_id(unsigned cid) noexcept {
  // Release: pairs with the acquire CAS in allocate() of the ID's next holder.
  bits_[cid / 64].fetch_and(~(std::uint64_t{1} << (cid % 64)), std::memory_order_release);
}

unsigned cid_space::lowest_free_below(unsigned limit) const noexcept {
  for (unsigned i = 0; i < words_ && i * 64 < limit; ++i) {
    const std::uint64_t v = bits_[i].load(std::memory_order_relaxed);
    if (v != ~std::uint64_t{0}) {
      const unsigned id = i * 64 + static_cast<unsigned>(std::countr_one(v));
      return std::min(id, limit);
    }
  }
  return limit;
}

unsigned cid_space::activate(unsigned w) noexcept {
  std::uint64_t s = slots_[w].load(std::memory_order_relaxed);
  unsigned cid = 0;
  // Relaxed CAS: it only has to win or lose against a reclaimer's CAS on
  // this word; the ID's earlier holders were this worker itself.
  if (state_of(s) == state_cached &&
      slots_[w].compare_exchange_strong(s, pack(cid_of(s), state_active, 0),
                                        std::memory_order_relaxed)) {
    cid = cid_of(s);
  } else {
    // Unset, or a reclaimer took it just now: a new one. No reclaimer
    // touches a slot that is not cached, so a plain store publishes it.
    cid = allocate();
    slots_[w].store(pack(cid, state_active, 0), std::memory_order_relaxed);
  }
  take_holder(cid, w);
  return cid;
}

void cid_space::deactivate(unsigned w, unsigned cid, std::int64_t now) noexcept {
  drop_holder(cid, w);
  if (cfg_.mode == concurrency_id_mode::ownership) {
    slots_[w].store(pack(0, state_unset, 0), std::memory_order_relaxed);
    free_id(cid);
    counters_.released.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Release: pairs with the acquire CAS in reclaim_if(), which takes the
    // ID only after this worker's writes under it.
    slots_[w].store(pack(cid, state_cached, now), std::memory_order_release);
  }
}

unsigned cid_space::move_down(unsigned w, unsigned cid) noexcept {
  if (lowest_free_below(cid) == cid) return cid;  // nothing lower is free
  // Between two tasks of the group: nothing runs under `cid` now. Give it
  // back first, then take the lowest: holding none, the worker always
  // finds one.
  drop_holder(cid, w);
  free_id(cid);
  counters_.released.fetch_add(1, std::memory_order_relaxed);
  const unsigned lower = allocate();
  slots_[w].store(pack(lower, state_active, 0), std::memory_order_relaxed);
  take_holder(lower, w);
  return lower;
}

template <class Rule>
bool cid_space::reclaim_if(unsigned i, Rule reclaimable) noexcept {
  std::uint64_t s = slots_[i].load(std::memory_order_relaxed);
  if (state_of(s) != state_cached || !reclaimable(s)) return false;
  // Acquire: pairs with the owner's release store in deactivate(). The CAS
  // fails when the owner took the slot back (activate) or cached it anew.
  if (slots_[i].compare_exchange_strong(s, pack(0, state_unset, 0), std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
    free_id(cid_of(s));
    counters_.reclaimed.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

unsigned cid_space::step(std::int64_t now) noexcept {
  if (cfg_.mode != concurrency_id_mode::batched_scan) return 0;
  std::uint32_t begin = cursor_.load(std::memory_order_relaxed);
  if (begin >= workers_) {
    // No pass under way: start one if the interval is over.
    std::int64_t started = pass_start_.load(std::memory_order_relaxed);
    if (now - started < cfg_.interval_ns) return 0;
    if (!pass_start_.compare_exchange_strong(started, now, std::memory_order_relaxed)) return 0;
    begin = 0;
    cursor_.store(std::min(cfg_.batch, workers_), std::memory_order_relaxed);
  } else if (!cursor_.compare_exchange_strong(begin, std::min(begin + cfg_.batch, workers_),
                                              std::memory_order_relaxed)) {
    return 0;  // another worker took this batch
  }
  const auto t0 = clock_now();
  const unsigned end = std::min(begin + cfg_.batch, workers_);
  for (unsigned i = begin; i < end; ++i) {
    reclaim_if(i, [&](std::uint64_t s) { return age_ns(s, now) >= cfg_.idle_threshold_ns; });
  }
  // The kernel's weight pass: with the idle IDs gone, no ID needs to be at
  // or above the number in use. Cached ones there go back now; active ones
  // move down at their owners' next scheduling points (keep()).
  const unsigned weight = in_use();
  unsigned taken = 0;
  for (unsigned i = begin; i < end; ++i) {
    taken += reclaim_if(i, [&](std::uint64_t s) { return cid_of(s) >= weight; }) ? 1 : 0;
  }
  // The number in use now, give or take the other workers' concurrent
  // takes and returns: a hint.
  const std::uint32_t old = target_.load(std::memory_order_relaxed);
  target_.store(((old >> 16) + 1) << 16 | ((weight - taken) & target_mask), std::memory_order_relaxed);
  const auto took = static_cast<std::uint64_t>((clock_now() - t0).count());
  unsigned bucket = 0;
  while (bucket < cid_step_bounds_ns.size() && took >= cid_step_bounds_ns[bucket]) ++bucket;
  counters_.steps.fetch_add(1, std::memory_order_relaxed);
  counters_.step_ns[bucket].fetch_add(1, std::memory_order_relaxed);
  return end - begin;
}

unsigned cid_space::in_use() const noexcept {
  unsigned n = 0;
  for (unsigned i = 0; i < words_; ++i) {
    n += static_cast<unsigned>(std::popcount(bits_[i].load(std::memory_order_relaxed)));
  }
  return n - (words_ * 64 - workers_);  // less the tail bits, always set
}

int cid_space::highest_in_use() const noexcept {
  for (unsigned i = words_; i-- > 0;) {
    std::uint64_t v = bits_[i].load(std::memory_order_relaxed);
    if (i == words_ - 1 && workers_ % 64 != 0) v &= (std::uint64_t{1} << (workers_ % 64)) - 1;
    if (v != 0) return static_cast<int>(i * 64 + 63 - static_cast<unsigned>(std::countl_zero(v)));
  }
  return -1;
}

int cid_space::slot_cid(unsigned w) const noexcept {
  const std::uint64_t s = slots_[w].load(std::memory_order_relaxed);
  return state_of(s) == state_unset ? -1 : static_cast<int>(cid_of(s));
}

bool cid_space::slot_active(unsigned w) const noexcept {
  return state_of(slots_[w].load(std::memory_order_relaxed)) == state_active;
}

void cid_space::add_stats(group_stats& out) const noexcept {
  out.cids_allocated += counters_.allocated.load(std::memory_order_relaxed);
  out.cids_reclaimed += counters_.reclaimed.load(std::memory_order_relaxed);
  out.cids_released += counters_.released.load(std::memory_order_relaxed);
  out.cid_steps += counters_.steps.load(std::memory_order_relaxed);
  for (unsigned b = 0; b < cid_step_buckets; ++b) {
    out.cid_step_ns[b] += counters_.step_ns[b].load(std::memory_order_relaxed);
  }
  out.cids_in_use = in_use();
  out.highest_cid = highest_in_use();
}

void cid_space::take_holder([[maybe_unused]] unsigned cid, [[maybe_unused]] unsigned w) noexcept {
#ifndef NDEBUG
  // Relaxed: the ID reached this worker through the slot and bit protocol,
  // whose acquire/release pairs order the previous holder's drop before this.
  const int before = holder_[cid].exchange(static_cast<int>(w), std::memory_order_relaxed);
  assert(before == -1 && "concurrency ID held active by two workers");
#endif
}

void cid_space::drop_holder([[maybe_unused]] unsigned cid, [[maybe_unused]] unsigned w) noexcept {
#ifndef NDEBUG
  const int before = holder_[cid].exchange(-1, std::memory_order_relaxed);
  assert(before == static_cast<int>(w) && "concurrency ID dropped by a worker not holding it");
#endif
}

void cid_table::create(unsigned g) {
  owned_[g] = std::make_unique<cid_space>(workers_, cfg_, cid_clock_ns());
  // Release: pairs with the acquire load in space().
  spaces_[g].store(owned_[g].get(), std::memory_order_release);
}

unsigned cid_user::take(unsigned g) noexcept {
  // Inside a task of `g`: at_switch() gave back any other group's ID
  // before the task started, so none is held here.
  assert(held_ == nullptr);
  cid_space& space = table_.space(g);
  held_cid_ = space.activate(worker_);
  held_ = &space;
  held_group_ = static_cast<int>(g);
  seen_ = 0;  // the next scheduling point looks at the target once
  return held_cid_;
}

void cid_user::switch_held(int next_group) noexcept {
  const bool batched = held_->mode() == concurrency_id_mode::batched_scan;
  if (next_group == held_group_) {
    // Running on in the group: its compaction step, if one is due.
    if (batched && (++points_ % clock_every == 0 || held_->pass_under_way())) {
      held_->step(cid_clock_ns());
    }
    held_cid_ = held_->keep(worker_, held_cid_, seen_);
    return;
  }
  const std::int64_t now = batched ? cid_clock_ns() : 0;
  if (batched) held_->step(now);  // the last point at which it runs the group
  held_->deactivate(worker_, held_cid_, now);
  held_ = nullptr;
  held_group_ = -1;
}

}  // namespace urt::detail
