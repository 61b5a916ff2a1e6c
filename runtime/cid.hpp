// cid: compact concurrency IDs per task group (urt::this_task::cid()),
// rseq's mm_cid rebuilt for workers. While a worker runs a task of group G
// it holds an ID of G's space that no other worker running G holds, below
// the number of workers, so per-ID data (urt::per_cid) is sized by how many
// workers run G at once rather than by the worker count.
//
// One cid_space per group, shared by all workers; each worker's view of it
// is its slot: one word holding its ID of G, the ID's state and, while
// cached, when it stopped running G:
//   unset   no ID;
//   active  the worker runs G with this ID (only its owner leaves this state);
//   cached  the worker stopped running G and keeps the ID to find it again
//           at no cost; a compaction step may take it back.
// A bitmap says which IDs are taken; allocation takes the lowest free bit,
// so IDs stay compact.
//
// Modes (runtime_options::cid_mode):
//   batched_scan: deactivate() caches. A full pass over the slots starts
//     at most every cid_scan_interval; each step() visits at most
//     cid_scan_batch slots, resuming where the previous step stopped (a
//     shared cursor), and reclaims a cached ID that is idle for
//     cid_idle_threshold or that is not below the number of IDs in use
//     after those reclaims (the kernel's "weight" pass). It publishes that
//     number as the target; an active worker holding an ID at or above it
//     moves to the lowest free ID at its next scheduling point (keep()).
//     Steps run at the scheduling points of workers running the group: no
//     thread of their own (the analog of the kernel's task_work). A worker
//     running on in one group reads the clock for that at one point in 16
//     (at every point while a pass is under way), and at each switch away.
//   ownership: deactivate() gives the ID back at once; no scan, no target.
//
// The reclaim protocol (invariant: an ID is in at most one slot, and only
// the owner of an active slot uses it):
//   - Only the owner moves its slot out of active (deactivate, keep) and
//     into active (activate). A reclaimer only ever changes a slot from
//     cached to unset, by compare-and-swap on the whole word, and only then
//     clears the ID's bit.
//   - The owner leaves cached by compare-and-swap too (activate). So of a
//     reclaimer and an owner starting a task of G at once, exactly one CAS
//     succeeds: the owner keeps its ID and the reclaimer skips it, or the
//     reclaimer takes it and the owner's CAS fails and it allocates a new
//     one. The word carries the time it was cached, so a slot cached again
//     after a reactivation is a different word (no ABA).
//   - Hand-over of per-ID data: the owner's writes under an ID happen
//     before its release store of the cached slot (or, giving it back, its
//     release clear of the bit); the reclaimer's CAS acquires the former
//     and its clear of the bit releases; the next holder's allocation
//     acquires that bit. So a holder sees everything its predecessors
//     wrote under the ID.
// Debug builds assert the invariant: each ID has a holder word that
// activation swaps the worker's id into (finding nobody) and deactivation
// swaps out.
//
// Progress: the owner's paths and steps are lock-free. An allocation finds
// a free bit without waiting, except when every ID of the space is taken
// and one of them is between a reclaimer's CAS and its clear of the bit:
// then it spins for those few instructions (only with every worker holding
// an ID of the group).
//
// Time is the cid clock (cid_clock_ns: CLOCK_MONOTONIC_COARSE, a few ns a
// read at a tick's resolution; the thresholds are tens of milliseconds).
// A unit test drives the space single-threaded with made-up times.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "urt/group.hpp"
#include "urt/options.hpp"

namespace urt::detail {

/// The cid module's clock, in ns (CLOCK_MONOTONIC_COARSE).
[[nodiscard]] std::int64_t cid_clock_ns() noexcept;

class cid_space {
 public:
  struct config {
    concurrency_id_mode mode = concurrency_id_mode::batched_scan;
    std::int64_t idle_threshold_ns = 100'000'000;
    unsigned batch = 16;
    std::int64_t interval_ns = 100'000'000;
  };
  /// The config of validated runtime options.
  [[nodiscard]] static config config_of(const runtime_options& o) noexcept;

  /// A space of `workers` IDs (1..max_workers) for as many workers; its
  /// first pass may start `cfg.interval_ns` after `now`.
  cid_space(unsigned workers, const config& cfg, std::int64_t now);
  ~cid_space();
  cid_space(const cid_space&) = delete;
  cid_space& operator=(const cid_space&) = delete;

  [[nodiscard]] unsigned size() const noexcept { return workers_; }
  [[nodiscard]] concurrency_id_mode mode() const noexcept { return cfg_.mode; }

  // ---- owner side: worker `w` only, for its own slot ----

  /// `w` starts running the group holding no active ID: its cached ID if
  /// still its own, else the lowest free one. Returns the ID.
  unsigned activate(unsigned w) noexcept;
  /// `w` stops running the group (another group, or idle), holding `cid`.
  void deactivate(unsigned w, unsigned cid, std::int64_t now) noexcept;
  /// `w` runs the group on (between two of its tasks) holding `cid`:
  /// returns the ID to hold from now on, lower than `cid` when compaction
  /// published a target at or below it and a lower ID is free. `seen`: the
  /// caller's copy of the last target it acted on. One relaxed load when
  /// nothing changed.
  unsigned keep(unsigned w, unsigned cid, std::uint32_t& seen) noexcept {
    const std::uint32_t t = target_.load(std::memory_order_relaxed);  // a hint (see step())
    if (t == seen) return cid;
    seen = t;
    return cid < (t & target_mask) ? cid : move_down(w, cid);
  }

  // ---- any worker running the group ----

  /// batched_scan: one compaction step if one is due (a pass is under way,
  /// or the interval since the last pass started is over). Returns the
  /// number of slots it visited (0: none due, or another worker took it).
  unsigned step(std::int64_t now) noexcept;
  /// Whether a pass is under way (then step() has a batch to give). Relaxed.
  [[nodiscard]] bool pass_under_way() const noexcept {
    return cursor_.load(std::memory_order_relaxed) < workers_;
  }

  // ---- any thread ----

  /// IDs taken now (active or cached).
  [[nodiscard]] unsigned in_use() const noexcept;
  /// The highest ID taken now, or -1.
  [[nodiscard]] int highest_in_use() const noexcept;
  /// The ID in worker `w`'s slot and whether it is active (-1: none).
  [[nodiscard]] int slot_cid(unsigned w) const noexcept;
  [[nodiscard]] bool slot_active(unsigned w) const noexcept;
  /// Adds this space's counters to `out` (the cid fields of group_stats).
  void add_stats(group_stats& out) const noexcept;

 private:
  static constexpr std::uint64_t state_unset = 0;
  static constexpr std::uint64_t state_cached = 1;
  static constexpr std::uint64_t state_active = 2;
  static constexpr std::uint32_t target_mask = 0xffff;
  static constexpr int time_shift = 10;  // cached times in units of 1024 ns
  static constexpr std::uint64_t time_mask = (std::uint64_t{1} << 46) - 1;

  static std::uint64_t pack(unsigned cid, std::uint64_t state, std::int64_t now) noexcept {
    return static_cast<std::uint64_t>(cid) | state << 16 |
           ((static_cast<std::uint64_t>(now) >> time_shift) & time_mask) << 18;
  }
  static unsigned cid_of(std::uint64_t s) noexcept { return static_cast<unsigned>(s & 0xffff); }
  static std::uint64_t state_of(std::uint64_t s) noexcept { return (s >> 16) & 3; }
  // Time since the slot word was cached (modulo 2^46 units: 2 years),
  // rounded up to the next unit: the truncation of both times to units
  // must not make an ID cached exactly a threshold ago look younger.
  static std::int64_t age_ns(std::uint64_t s, std::int64_t now) noexcept {
    const std::uint64_t t = s >> 18;
    const std::uint64_t n = (static_cast<std::uint64_t>(now) >> time_shift) & time_mask;
    return static_cast<std::int64_t>((((n - t) & time_mask) + 1) << time_shift);
  }

  unsigned allocate() noexcept;
  void free_id(unsigned cid) noexcept;
  // The lowest free ID below `limit`, or `limit` when there is none (a racy look).
  [[nodiscard]] unsigned lowest_free_below(unsigned limit) const noexcept;
  unsigned move_down(unsigned w, unsigned cid) noexcept;
  // Reclaims slot `i` if it is cached and `reclaimable` says so of its
  // word; true when it did.
  template <class Rule>
  bool reclaim_if(unsigned i, Rule reclaimable) noexcept;
  // Debug builds: the uniqueness assertion (see the protocol above).
  void take_holder(unsigned cid, unsigned w) noexcept;
  void drop_holder(unsigned cid, unsigned w) noexcept;

  const config cfg_;
  const unsigned workers_;
  const unsigned words_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;  // per worker, dense: a step reads 2 lines
  std::unique_ptr<std::atomic<std::uint64_t>[]> bits_;   // taken IDs; bits past workers_ set
#ifndef NDEBUG
  std::unique_ptr<std::atomic<int>[]> holder_;  // per ID: the worker holding it active, or -1
#endif

  // The scan: a full pass starts when the interval since pass_start_ is
  // over (CAS on pass_start_, so one worker starts it); each step claims
  // [cursor, cursor + batch) by CAS on cursor_; cursor_ == workers_: no pass
  // under way. Relaxed: they only spread the work; the slots and bits carry
  // their own ordering.
  alignas(64) std::atomic<std::uint32_t> cursor_;
  std::atomic<std::int64_t> pass_start_;
  // (generation << 16) | IDs in use after the last step: relaxed, a hint
  // for keep(); a stale one costs one futile look.
  std::atomic<std::uint32_t> target_{0};

  // Statistics, relaxed; written on slow paths only.
  struct counters {
    std::atomic<std::uint64_t> allocated{0};
    std::atomic<std::uint64_t> reclaimed{0};
    std::atomic<std::uint64_t> released{0};
    std::atomic<std::uint64_t> steps{0};
    std::array<std::atomic<std::uint64_t>, cid_step_buckets> step_ns{};
  };
  alignas(64) counters counters_;
};

/// The cid spaces of a runtime, one per group (created with the group,
/// before its handle exists, and never freed before the runtime).
class cid_table {
 public:
  cid_table(unsigned workers, const cid_space::config& cfg) : workers_(workers), cfg_(cfg) {}
  /// Creates group `g`'s space (any thread, once per group, before any task
  /// of `g` can exist).
  void create(unsigned g);
  /// The space of a group that exists. Acquire: pairs with the release
  /// store in create().
  [[nodiscard]] cid_space& space(unsigned g) const noexcept {
    return *spaces_[g].load(std::memory_order_acquire);
  }

 private:
  unsigned workers_;
  cid_space::config cfg_;
  std::array<std::unique_ptr<cid_space>, max_groups> owned_{};
  std::array<std::atomic<cid_space*>, max_groups> spaces_{};
};

/// One worker's use of the cid spaces (owner only): the ID it holds active,
/// if any, and the scheduling-point hook.
class cid_user {
 public:
  cid_user(const cid_table& table, unsigned worker) noexcept : table_(table), worker_(worker) {}

  /// In a task of group `g`: its ID. Two loads and a compare once held.
  unsigned get(unsigned g) noexcept {
    return static_cast<int>(g) == held_group_ ? held_cid_ : take(g);
  }
  /// At a scheduling point, before the next task runs: its group, or -1
  /// when the worker goes idle. Nothing to do unless an ID is held.
  void at_switch(int next_group) noexcept {
    if (held_ != nullptr) switch_held(next_group);
  }
  /// The group whose ID is held active, or -1.
  [[nodiscard]] int held_group() const noexcept { return held_group_; }

 private:
  unsigned take(unsigned g) noexcept;
  void switch_held(int next_group) noexcept;

  const cid_table& table_;
  // A worker running on in one group looks at the clock (to see whether a
  // pass is due) once in this many scheduling points, or at each while a
  // pass is under way: a pass then starts at most this many points late.
  static constexpr unsigned clock_every = 16;

  const unsigned worker_;
  unsigned points_ = 0;  // scheduling points in the held group
  cid_space* held_ = nullptr;
  int held_group_ = -1;
  unsigned held_cid_ = 0;
  std::uint32_t seen_ = 0;
};

}  // namespace urt::detail
