// cpupri: which workers run at which priority (kernel/sched/cpupri.c).
//
// Each worker publishes its current level: idle, or the highest priority
// among its running and queued tasks. find() answers "where can a task of
// priority p run next": a worker inside its affinity whose level is strictly
// lower, from the lowest non-empty level, preferring the task's last worker,
// then the calling worker, then the caller's LLC, its NUMA node, the rest.
//
// Layouts (cpupri_layout): one bitmask per level (global), per level per NUMA
// node, per level per LLC (each level of each shard on cache lines of its
// own), all updated with locked RMWs; or per_llc_bytes: per LLC one cache
// line of bytes, a byte per worker holding its level, written by a plain
// release store (no locked read-modify-write), where find() reads each LLC's
// bytes once instead of scanning level by level. As upstream did in 2025,
// there is no per-level count: keeping it coherent with the mask cost
// atomics and barriers that outweighed the early exit.
//
// per_llc_bytes' find (DESIGN.md, "cpupri"): one pass over the LLCs in
// preference order, each LLC's bytes read once, 16 at a time with SSE2
// where it is there (x86-64's baseline), else one at a time (the portable
// scan, selected at compile time; also under ThreadSanitizer, which cannot
// see a vector load of atomic bytes as atomic). An LLC is skipped after one
// compare of its bytes against the best level found so far, an idle worker
// ends the search, and only the LLC that wins is picked from (one division
// for the rotation per find). There is no summary of a shard's lowest
// level: keeping one exact needs a locked RMW or a full fence in set(),
// which would cost the update what the bytes saved (DESIGN.md, "cpupri").
//
// Concurrency:
//   - set(w, ...) only under w's queue lock (one writer at a time per
//     worker: its owner, or a worker that pushes a task into it or pulls
//     one out; the lock orders successive writers); concurrently with set()
//     of other workers and with any number of find(). It writes only the
//     shard that holds w (invariant 3 for per_llc*).
//   - find() and level() from any thread; wait-free, no writes.
//   - Bit layouts: a raise publishes the new level (release) before
//     retracting the old one (release); find() scans levels upwards with
//     acquire, so a worker being raised is seen in at least one of them
//     (invariant 2). A lowering can be missed for a moment; the next push
//     migration heals that. per_llc_bytes: one byte store moves a worker
//     from its old level to its new one at once; find() reads each byte
//     once (a 16-byte load reads each of its bytes atomically on x86-64)
//     and takes its answer from what it read, never from a second read, so
//     it sees either level.
// Answers are advisory: by the time find() returns, levels may have changed;
// whoever acts on it re-checks under the target's lock (invariant 6).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "urt/worker_set.hpp"
#include "urt/options.hpp"
#include "urt/priority.hpp"
#include "urt/topology.hpp"

// Clang spells ThreadSanitizer __has_feature(thread_sanitizer).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define URT_CPUPRI_HAS_TSAN 1
#endif
#endif
#ifndef URT_CPUPRI_HAS_TSAN
#define URT_CPUPRI_HAS_TSAN 0
#endif
// per_llc_bytes' scan: SSE2 where the compiler targets it, except under
// ThreadSanitizer (which would report the vector loads of atomic bytes).
#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__) && !URT_CPUPRI_HAS_TSAN
#define URT_CPUPRI_SSE2 1
#else
#define URT_CPUPRI_SSE2 0
#endif

namespace urt::detail {

class cpupri {
 public:
  /// Worker levels: idle, or a task priority 0..99; invalid = not routable
  /// (not started, or stopped): find() never returns such a worker.
  static constexpr int level_invalid = -2;
  static constexpr int level_idle = -1;
  /// find() result when no worker qualifies.
  static constexpr unsigned none = max_workers;

  /// Builds the map for `workers` (dense ids, each LLC and NUMA node a
  /// contiguous id range, as urt::topology produces), every worker invalid.
  cpupri(cpupri_layout layout, std::span<const worker_place> workers);
  cpupri(const cpupri&) = delete;
  cpupri& operator=(const cpupri&) = delete;

  /// Under `worker`'s queue lock only: publishes its new level
  /// (level_invalid, level_idle or 0..99).
  void set(unsigned worker, int level) noexcept {
    if (layout_ != cpupri_layout::per_llc_bytes) {
      set_bits(worker, level);
      return;
    }
    // The default layout's whole update, inline: one plain store into the
    // worker's own byte (one writer at a time, no RMW) moves it from the old
    // level to the new one at once, so a concurrent find sees one or the
    // other, never neither. Release: pairs with the acquire fence in
    // find_bytes(). An unchanged level is not stored again, so readers keep
    // the line. Relaxed load: the writer reads back its own last store.
    std::atomic<std::uint8_t>& b = *byte_of_[worker];
    const std::uint8_t v = encode(level);
    if (b.load(std::memory_order_relaxed) != v) b.store(v, std::memory_order_release);
  }
  /// The level last set for `worker` (relaxed: may trail a concurrent set).
  [[nodiscard]] int level(unsigned worker) const noexcept {
    if (layout_ == cpupri_layout::per_llc_bytes) {
      return decode(byte_of_[worker]->load(std::memory_order_relaxed));
    }
    return levels_[worker].value.load(std::memory_order_relaxed);
  }

  /// A worker where a task of `priority` could run next, or `none`.
  /// `affinity` null means every worker; `from` is the calling worker (or
  /// `none` for an outside thread), `last` the task's previous worker (or
  /// `none`); `rotation` picks where the scan starts inside a cache so that
  /// concurrent placements spread (the runtime passes a per-thread counter;
  /// tests pass a fixed value so that every layout must give one answer).
  [[nodiscard]] unsigned find(priority_t priority, const worker_set* affinity, unsigned from,
                              unsigned last, unsigned rotation) const noexcept;
  /// find() among the workers of `affinity` (null: all) other than
  /// `exclude`, with no caller and no last worker: the same answer as
  /// find() on that set. per_llc_bytes with the SIMD scan and LLCs of at
  /// most 64 workers (one line each) masks the worker's byte out in the
  /// scan; otherwise it builds the set.
  [[nodiscard]] unsigned find_other(priority_t priority, const worker_set* affinity,
                                    unsigned exclude, unsigned rotation) const noexcept;
  /// find() with per_llc_bytes' portable scan, the one find() uses where
  /// SSE2 is missing: tests and urt-cpupri-bench call it to check and
  /// measure that path on x86-64 too. Other layouts: the same as find().
  [[nodiscard]] unsigned find_portable(priority_t priority, const worker_set* affinity,
                                       unsigned from, unsigned last,
                                       unsigned rotation) const noexcept;
  /// Whether find() scans per_llc_bytes' bytes 16 at a time (SSE2).
  static constexpr bool simd_scan = URT_CPUPRI_SSE2 != 0;

  [[nodiscard]] cpupri_layout layout() const noexcept { return layout_; }
  [[nodiscard]] std::size_t worker_count() const noexcept { return workers_.size(); }
  [[nodiscard]] std::size_t shard_count() const noexcept { return shards_.size(); }

  /// Number of level slots: idle, normal (0), then FIFO 1..99.
  static constexpr int slots = priority_levels + 1;

 private:
  struct range {
    unsigned first = 0;  // first worker id
    unsigned count = 0;
  };
  struct shard {
    range workers;
    std::size_t base = 0;   // index of its first line
    std::size_t lines = 0;  // lines per level
  };
  // A run of at most 64 workers of one group that lies in one shard and
  // maps to one word of the group's bitmap: what group_bits() reads at once.
  struct chunk {
    unsigned shard = 0;
    unsigned first = 0;  // first worker id
    unsigned count = 0;  // <= 64
    unsigned word = 0;   // word of the group bitmap
    unsigned shift = 0;  // bit offset inside that word (count + shift <= 64)
  };
  struct group {            // a last-level cache: the unit of preference
    range workers;
    unsigned numa = 0;
    // The groups of its NUMA node, [numa_first, numa_end): a contiguous
    // range, since NUMA nodes and LLCs are contiguous id ranges.
    unsigned numa_first = 0;
    unsigned numa_end = 0;
    std::vector<chunk> chunks;
  };
  // per_llc_bytes: what find() reads of an LLC, kept dense (16 bytes an
  // LLC) apart from `group`.
  struct byte_span {
    const std::atomic<std::uint8_t>* bytes = nullptr;  // its shard's lines, contiguous;
                                                       // past its last worker all 0
    unsigned first = 0;                                // first worker id
    unsigned count = 0;                                // workers
  };
  struct alignas(64) line {
    std::atomic<std::uint64_t> words[8];  // bit layouts: 512 workers
  };
  struct alignas(64) byte_line {
    std::atomic<std::uint8_t> bytes[64];  // per_llc_bytes: 64 workers
  };
  struct alignas(64) padded_level {
    std::atomic<int> value{level_invalid};
  };

  static constexpr int slot_of(int level) noexcept { return level + 1; }  // idle -> 0
  // per_llc_bytes: a worker's byte is 0 when invalid, else its slot + 1, so
  // that a zeroed line reads as "nobody" and lower bytes are lower levels.
  static constexpr std::uint8_t encode(int level) noexcept {
    return level == level_invalid ? 0 : static_cast<std::uint8_t>(slot_of(level) + 1);
  }
  static constexpr int decode(std::uint8_t byte) noexcept {
    return byte == 0 ? level_invalid : byte - 2;
  }
  void set_bits(unsigned worker, int level) noexcept;
  void publish(unsigned worker, int slot, bool on) noexcept;
  [[nodiscard]] bool member(int slot, unsigned worker) const noexcept;
  // Bits of `g`'s workers at `slot`, ANDed with the affinity, into out[]
  // (bit i = worker g.first + i); returns whether any bit is set.
  bool group_bits(int slot, const group& g, const worker_set* affinity,
                  std::uint64_t* out) const noexcept;
  [[nodiscard]] std::uint64_t chunk_bits(int slot, const chunk& c,
                                         const worker_set* affinity) const noexcept;
  [[nodiscard]] unsigned pick(const group& g, const std::uint64_t* bits,
                              unsigned rotation) const noexcept;
  // Fills out[] with every group index in preference order from `home`.
  unsigned preference_order(unsigned home, unsigned* out) const noexcept;
  // Exclude (find_other(); one-line LLCs only): `last` is the worker that
  // takes no part, and there is no last worker and no caller (`from` is
  // none). Passed in `last`, so that every call keeps its arguments in
  // registers.
  template <bool Simd, bool Masked, bool Exclude = false>
  [[nodiscard]] unsigned find_bytes(priority_t priority, const worker_set* affinity, unsigned from,
                                    unsigned last, unsigned rotation) const noexcept;
  [[nodiscard]] std::atomic<std::uint8_t>& value_byte(unsigned worker) const noexcept;

  cpupri_layout layout_;
  std::vector<worker_place> workers_;
  std::vector<unsigned> shard_of_;  // worker -> shard
  std::vector<shard> shards_;
  std::vector<group> groups_;       // LLCs in id order
  std::unique_ptr<line[]> lines_;           // bit layouts
  std::unique_ptr<byte_line[]> byte_lines_; // per_llc_bytes
  std::unique_ptr<padded_level[]> levels_;  // bit layouts: worker -> current level
  std::unique_ptr<std::atomic<std::uint8_t>*[]> byte_of_;  // per_llc_bytes: worker -> its byte
  std::unique_ptr<byte_span[]> spans_;                       // per_llc_bytes: LLC -> its bytes
  bool one_line_llcs_ = false;  // per_llc_bytes: every LLC has at most 64 workers
};

}  // namespace urt::detail
