#include "cpupri.hpp"

#if URT_CPUPRI_SSE2
#include <emmintrin.h>
#endif

#include <algorithm>
#include <stdexcept>
#include <string>

#include "hot.hpp"

namespace urt::detail {
namespace {

constexpr unsigned line_bits = 512;   // bits per cache line of a bit layout
constexpr unsigned line_bytes = 64;   // workers per cache line of per_llc_bytes

unsigned div_up(unsigned a, unsigned b) { return (a + b - 1) / b; }

// Bits [offset, offset + 64) of a bitmap whose words come from word(i)
// (0 past the end `nwords`).
template <class WordFn>
std::uint64_t bits_at(WordFn word, unsigned nwords, unsigned offset) noexcept {
  const unsigned w = offset / 64;
  const unsigned shift = offset % 64;
  const std::uint64_t lo = w < nwords ? word(w) : 0;
  if (shift == 0) return lo;
  const std::uint64_t hi = w + 1 < nwords ? word(w + 1) : 0;
  return (lo >> shift) | (hi << (64 - shift));
}

std::uint64_t low_mask(unsigned count) noexcept {
  return count >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
}

}  // namespace

cpupri::cpupri(cpupri_layout layout, std::span<const worker_place> workers)
    : layout_(layout), workers_(workers.begin(), workers.end()) {
  const auto n = static_cast<unsigned>(workers_.size());
  if (n == 0 || n > max_workers) {
    throw std::invalid_argument("cpupri: " + std::to_string(n) + " workers (need 1.." +
                                std::to_string(max_workers) + ")");
  }
  // Runs of equal `key` over the worker ids; each key must form one run.
  const auto runs = [&](auto key, const char* what) {
    std::vector<range> out;
    for (unsigned w = 0; w < n; ++w) {
      if (w == 0 || key(workers_[w]) != key(workers_[w - 1])) {
        if (key(workers_[w]) != out.size()) {
          throw std::invalid_argument(std::string("cpupri: the workers of ") + what + " " +
                                      std::to_string(key(workers_[w])) +
                                      " are not a contiguous id range");
        }
        out.push_back(range{w, 0});
      }
      ++out.back().count;
    }
    return out;
  };
  for (const range& r : runs([](const worker_place& p) { return p.llc; }, "LLC")) {
    group g;
    g.workers = r;
    g.numa = workers_[r.first].numa;
    groups_.push_back(std::move(g));
  }
  // Each NUMA node's groups: a contiguous range (group numa ids never
  // decrease, since both are contiguous id ranges in worker order).
  for (unsigned gi = 0; gi < groups_.size();) {
    unsigned end = gi;
    while (end < groups_.size() && groups_[end].numa == groups_[gi].numa) ++end;
    for (unsigned k = gi; k < end; ++k) {
      groups_[k].numa_first = gi;
      groups_[k].numa_end = end;
    }
    gi = end;
  }
  std::vector<range> shard_ranges;
  switch (layout) {
    case cpupri_layout::global:
      shard_ranges.push_back(range{0, n});
      break;
    case cpupri_layout::per_numa:
      shard_ranges = runs([](const worker_place& p) { return p.numa; }, "NUMA node");
      break;
    case cpupri_layout::per_llc:
    case cpupri_layout::per_llc_bytes:
      for (const group& g : groups_) shard_ranges.push_back(g.workers);
      break;
    default:
      throw std::invalid_argument("runtime_options.cpupri: value " +
                                  std::to_string(static_cast<int>(layout)) +
                                  " is not a cpupri_layout");
  }
  // Bit layouts: one mask per level per shard. per_llc_bytes: one byte per
  // worker per shard, holding its level.
  const bool bytes = layout == cpupri_layout::per_llc_bytes;
  std::size_t total = 0;
  shard_of_.resize(n);
  for (const range& r : shard_ranges) {
    shard s{r, total, div_up(r.count, bytes ? line_bytes : line_bits)};
    total += s.lines * (bytes ? 1 : slots);
    for (unsigned w = r.first; w < r.first + r.count; ++w) {
      shard_of_[w] = static_cast<unsigned>(shards_.size());
    }
    shards_.push_back(s);
  }
  // Value-initialized: every word and byte starts at zero (nobody anywhere).
  if (layout == cpupri_layout::per_llc_bytes) {
    byte_lines_ = std::make_unique<byte_line[]>(total);
    byte_of_ = std::make_unique<std::atomic<std::uint8_t>*[]>(n);
    for (unsigned w = 0; w < n; ++w) {
      const shard& s = shards_[shard_of_[w]];
      const unsigned local = w - s.workers.first;
      byte_of_[w] = &byte_lines_[s.base + local / line_bytes].bytes[local % line_bytes];
    }
    // Shards are the LLCs, in the same order.
    spans_ = std::make_unique<byte_span[]>(groups_.size());
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      spans_[g] = byte_span{byte_lines_[shards_[g].base].bytes, groups_[g].workers.first,
                            groups_[g].workers.count};
    }
    one_line_llcs_ = std::all_of(groups_.begin(), groups_.end(),
                                 [](const group& g) { return g.workers.count <= line_bytes; });
  } else {
    lines_ = std::make_unique<line[]>(total);
    levels_ = std::make_unique<padded_level[]>(n);
  }
  // Cut each group into chunks: a new chunk at every shard boundary and
  // every 64th worker of the group. Usually one chunk per group.
  for (group& g : groups_) {
    for (unsigned w = g.workers.first; w < g.workers.first + g.workers.count;) {
      const shard& s = shards_[shard_of_[w]];
      const unsigned i = w - g.workers.first;
      const unsigned end = std::min({g.workers.first + g.workers.count,
                                     s.workers.first + s.workers.count, w + (64 - i % 64)});
      g.chunks.push_back(chunk{shard_of_[w], w, end - w, i / 64, i % 64});
      w = end;
    }
  }
}

void cpupri::publish(unsigned worker, int slot, bool on) noexcept {
  const shard& s = shards_[shard_of_[worker]];
  const unsigned local = worker - s.workers.first;
  const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
  std::atomic<std::uint64_t>& word = lines_[at + local / line_bits].words[(local % line_bits) / 64];
  const std::uint64_t bit = std::uint64_t{1} << (local % 64);
  // Shared words (other workers' bits live in them too): a locked RMW.
  // Release: pairs with the acquire load in member() and the acquire fence
  // in group_bits(); set_bits() relies on it so that a reader who sees the
  // retraction of the old level also sees the publication of the new one.
  if (on) {
    word.fetch_or(bit, std::memory_order_release);
  } else {
    word.fetch_and(~bit, std::memory_order_release);
  }
}

URT_HOT void cpupri::set_bits(unsigned worker, int level) noexcept {
  // Relaxed: one writer at a time (the holder of the worker's queue lock).
  const int old = levels_[worker].value.load(std::memory_order_relaxed);
  if (old == level) return;
  // Publish the new level before retracting the old one (invariant 2);
  // the second release RMW cannot become visible before the first.
  if (level != level_invalid) publish(worker, slot_of(level), true);
  if (old != level_invalid) publish(worker, slot_of(old), false);
  levels_[worker].value.store(level, std::memory_order_relaxed);
}

std::atomic<std::uint8_t>& cpupri::value_byte(unsigned worker) const noexcept {
  return *byte_of_[worker];
}

bool cpupri::member(int slot, unsigned worker) const noexcept {
  const shard& s = shards_[shard_of_[worker]];
  const unsigned local = worker - s.workers.first;
  const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
  // Acquire: pairs with the release RMWs in publish().
  const std::uint64_t word =
      lines_[at + local / line_bits].words[(local % line_bits) / 64].load(std::memory_order_acquire);
  return ((word >> (local % 64)) & 1) != 0;
}

std::uint64_t cpupri::chunk_bits(int slot, const chunk& c, const worker_set* affinity) const noexcept {
  const shard& s = shards_[c.shard];
  const unsigned local = c.first - s.workers.first;
  const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
  const auto word = [&](unsigned i) {
    // Relaxed: the acquire fence in group_bits() after these loads pairs
    // with the release RMWs in publish().
    return lines_[at + i / (line_bits / 64)].words[i % (line_bits / 64)].load(
        std::memory_order_relaxed);
  };
  std::uint64_t bits = bits_at(word, s.lines * (line_bits / 64), local) & low_mask(c.count);
  if (affinity != nullptr) {
    const auto& allowed = affinity->bits();
    bits &= bits_at([&](unsigned i) { return allowed[i]; },
                    static_cast<unsigned>(worker_set::words), c.first);
  }
  return bits;
}

bool cpupri::group_bits(int slot, const group& g, const worker_set* affinity,
                        std::uint64_t* out) const noexcept {
  std::uint64_t any = 0;
  if (g.chunks.size() == 1) {  // the common case: one shard, at most 64 workers
    any = out[0] = chunk_bits(slot, g.chunks[0], affinity);
  } else {
    const unsigned nwords = div_up(g.workers.count, 64);
    for (unsigned k = 0; k < nwords; ++k) out[k] = 0;
    for (const chunk& c : g.chunks) {
      const std::uint64_t bits = chunk_bits(slot, c, affinity);
      out[c.word] |= bits << c.shift;
      any |= bits;
    }
  }
  // Acquire: pairs with the release RMWs in publish(), so a retraction
  // seen at this level implies the publication of the level it moved to.
  std::atomic_thread_fence(std::memory_order_acquire);
  return any != 0;
}

unsigned cpupri::pick(const group& g, const std::uint64_t* bits, unsigned rotation) const noexcept {
  const unsigned count = g.workers.count;
  const unsigned start = rotation % count;
  const unsigned nwords = div_up(count, 64);
  // First set bit at or after `start`, else the first one before it.
  for (unsigned pass = 0; pass < 2; ++pass) {
    for (unsigned k = pass == 0 ? start / 64 : 0; k < nwords; ++k) {
      std::uint64_t word = bits[k];
      if (pass == 0 && k == start / 64) word &= ~low_mask(start % 64);
      if (word != 0) {
        return g.workers.first + 64 * k + static_cast<unsigned>(std::countr_zero(word));
      }
    }
  }
  return none;  // unreachable: the caller saw a set bit
}

unsigned cpupri::preference_order(unsigned home, unsigned* out) const noexcept {
  // The home LLC, the other LLCs of its NUMA node, then the rest; each
  // part in LLC order starting after the home LLC.
  const auto groups = static_cast<unsigned>(groups_.size());
  const unsigned numa = groups_[home].numa;
  unsigned n = 0;
  out[n++] = home;
  for (unsigned pass = 0; pass < 2; ++pass) {
    for (unsigned k = 1; k < groups; ++k) {
      const unsigned gi = (home + k) % groups;
      if ((groups_[gi].numa == numa) == (pass == 0)) out[n++] = gi;
    }
  }
  return n;
}

URT_HOT unsigned cpupri::find(priority_t priority, const worker_set* affinity, unsigned from,
                              unsigned last, unsigned rotation) const noexcept {
  if (!is_valid_priority(priority)) return none;
  if (layout_ == cpupri_layout::per_llc_bytes) {
    return affinity == nullptr ? find_bytes<simd_scan, false>(priority, affinity, from, last, rotation)
                               : find_bytes<simd_scan, true>(priority, affinity, from, last, rotation);
  }
  const auto n = static_cast<unsigned>(workers_.size());
  const bool check_last =
      last < n && last != from && (affinity == nullptr || affinity->contains(last));
  const auto groups = static_cast<unsigned>(groups_.size());
  // The caller's LLC comes first; an outside thread starts at a rotating one.
  const unsigned home = from < n ? workers_[from].llc : rotation % groups;
  const group& home_group = groups_[home];
  // Bit of `from` in the home group's bitmap, if it is allowed there.
  const bool check_from = from < n && (affinity == nullptr || affinity->contains(from));
  const unsigned from_bit = check_from ? from - home_group.workers.first : 0;
  unsigned order[max_workers];
  unsigned count = 0;  // the order is built only once the home LLC has failed
  std::uint64_t bits[worker_set::words];
  for (int slot = 0; slot < slot_of(priority); ++slot) {  // strictly lower levels only
    if (check_last && member(slot, last)) return last;
    if (group_bits(slot, home_group, affinity, bits)) {
      if (check_from && ((bits[from_bit / 64] >> (from_bit % 64)) & 1) != 0) return from;
      return pick(home_group, bits, rotation);
    }
    if (count == 0) count = preference_order(home, order);
    for (unsigned i = 1; i < count; ++i) {
      const group& g = groups_[order[i]];
      if (group_bits(slot, g, affinity, bits)) return pick(g, bits, rotation);
    }
  }
  return none;
}

// per_llc_bytes' find. A byte's rank is its value minus one, wrapping:
// idle 0, level l at l + 1, invalid (0) at 255, so a candidate of a task
// of priority p is a rank below slot_of(p) and a lower rank is a lower
// level. One pass over the LLCs in preference order, each LLC's bytes read
// once: an LLC wins only with a rank strictly below the best one so far
// (earlier LLCs win ties), and only the winner is picked from. The answer
// comes from the bytes as they were read, never from a second read, so a
// worker that was a candidate when its byte was read cannot vanish between
// two reads (invariant 2).
namespace {

// Scans one LLC's bytes once (`count` workers from worker `first`):
// returns the lowest rank below `bound` among its workers in `affinity`
// (nullptr: all) and sets bits[k] bit i for the worker 64k + i of the LLC
// when it holds that rank; returns `bound`, bits[] undefined, when no
// worker is below it. Relaxed loads: the acquire fence in find_bytes()
// after the scan pairs with the release store in set().
std::uint8_t scan_portable(const std::atomic<std::uint8_t>* bytes, unsigned first,
                           unsigned count, const worker_set* affinity, std::uint8_t bound,
                           std::uint64_t* bits) noexcept {
  std::uint8_t low = bound;
  for (unsigned i = 0; i < count; ++i) {
    const auto rank = static_cast<std::uint8_t>(bytes[i].load(std::memory_order_relaxed) - 1);
    if (rank > low || (rank == low && low == bound)) continue;
    if (affinity != nullptr && !affinity->contains(first + i)) continue;
    if (rank < low) {
      low = rank;
      for (unsigned k = 0; k <= (count - 1) / 64; ++k) bits[k] = 0;
    }
    bits[i / 64] |= std::uint64_t{1} << (i % 64);
  }
  return low;
}

#if URT_CPUPRI_SSE2
// 0xff in each byte whose worker is not in the 16 bits `allowed` (bit i:
// byte i).
__m128i excluded(std::uint64_t allowed) noexcept {
  constexpr std::uint64_t spread = 0x0101010101010101;
  const __m128i x = _mm_set_epi64x(static_cast<long long>(((allowed >> 8) & 0xff) * spread),
                                   static_cast<long long>((allowed & 0xff) * spread));
  const __m128i bit = _mm_set_epi8(-128, 64, 32, 16, 8, 4, 2, 1, -128, 64, 32, 16, 8, 4, 2, 1);
  return _mm_cmpeq_epi8(_mm_and_si128(x, bit), _mm_setzero_si128());
}

// 0xff in byte i (< 16), 0 elsewhere.
__m128i byte_mask(unsigned i) noexcept {
  const __m128i index = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm_cmpeq_epi8(_mm_set1_epi8(static_cast<char>(i)), index);
}

// The lowest of the 16 bytes of `m`.
std::uint8_t min_byte(__m128i m) noexcept {
  m = _mm_min_epu8(m, _mm_srli_si128(m, 8));
  m = _mm_min_epu8(m, _mm_srli_si128(m, 4));
  m = _mm_min_epu8(m, _mm_srli_si128(m, 2));
  m = _mm_min_epu8(m, _mm_srli_si128(m, 1));
  return static_cast<std::uint8_t>(_mm_cvtsi128_si32(m) & 0xff);
}

// One line of an LLC's bytes (at most 64 workers, `vectors` of 16 bytes,
// from worker `first`), as ranks into rank[] (workers outside `affinity`
// at 255); returns their bytewise minimum. Each 16-byte load is one aligned
// vector load of 16 atomic bytes: a mixed-size access the C++ memory model
// does not describe, which x86-64 performs reading each byte atomically (a
// byte store of set() is seen whole or not at all). volatile keeps the
// compiler from splitting the load or reading the bytes again (the
// kernel's READ_ONCE): everything after works on the registers read.
// Relaxed in effect (x86-64 does not reorder loads with loads); the acquire
// fence in find_bytes() after the scan pairs with the release store in
// set(). The bytes past an LLC's last worker, up to its line's end, are 0
// (rank 255), never candidates.
// Skip: the worker at index `skip` of the line (if any) is ranked 255 too,
// as one outside the affinity (find_other()).
template <bool Masked, bool Skip = false>
URT_HOT __m128i load_line(const volatile __m128i* line, unsigned vectors,
                          const worker_set* affinity, unsigned first, __m128i* rank,
                          [[maybe_unused]] unsigned skip = 0) noexcept {
  static_assert(sizeof(std::atomic<std::uint8_t>) == 1 &&
                std::atomic<std::uint8_t>::is_always_lock_free);
  const __m128i all = _mm_set1_epi8(-1);
  __m128i lowest = all;
  for (unsigned j = 0; j < vectors; ++j) {
    __m128i r = _mm_add_epi8(line[j], all);  // rank = byte - 1
    if constexpr (Masked) {
      const std::uint64_t allowed =
          bits_at([&](unsigned k) { return affinity->bits()[k]; },
                  static_cast<unsigned>(worker_set::words), first + 16 * j) &
          0xffff;
      r = _mm_or_si128(r, excluded(allowed));
    }
    if constexpr (Skip) {
      if (skip / 16 == j) r = _mm_or_si128(r, byte_mask(skip % 16));
    }
    rank[j] = r;
    lowest = _mm_min_epu8(lowest, r);
  }
  return lowest;
}

// Whether some byte of `v` is below the same byte of `below`.
bool any_below(__m128i v, __m128i below) noexcept {
  // below - v (saturating) is 0 exactly where v >= below.
  return _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_subs_epu8(below, v), _mm_setzero_si128())) !=
         0xffff;
}

// Bit j * 16 + i set where byte i of rank[j] is `m`.
std::uint64_t positions(const __m128i* rank, unsigned vectors, std::uint8_t m) noexcept {
  const __m128i want = _mm_set1_epi8(static_cast<char>(m));
  std::uint64_t word = 0;
  for (unsigned j = 0; j < vectors; ++j) {
    word |= static_cast<std::uint64_t>(
                static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(rank[j], want))))
            << (16 * j);
  }
  return word;
}

// scan_portable's result, 16 bytes at a time, for an LLC of any size;
// `below` holds `bound` in every byte.
template <bool Masked>
std::uint8_t scan_sse2(const std::atomic<std::uint8_t>* bytes, unsigned first, unsigned count,
                       const worker_set* affinity, std::uint8_t bound, __m128i below,
                       std::uint64_t* bits) noexcept {
  const auto* base = reinterpret_cast<const volatile __m128i*>(bytes);
  const unsigned vectors = (count + 15) / 16;
  std::uint8_t low = bound;
  for (unsigned l = 0; 4 * l < vectors; ++l) {
    const unsigned n = std::min(4u, vectors - 4 * l);
    __m128i rank[4];
    const __m128i lowest = load_line<Masked>(base + 4 * l, n, affinity, first + 64 * l, rank);
    if (!any_below(lowest, below)) {
      bits[l] = 0;
      continue;
    }
    const std::uint8_t m = min_byte(lowest);
    if (m < low) {
      low = m;
      for (unsigned k = 0; k < l; ++k) bits[k] = 0;
      // Later lines count at or below the LLC's lowest rank (they take part
      // in the rotation).
      below = _mm_set1_epi8(static_cast<char>(m + 1));
    }
    bits[l] = positions(rank, n, m);
  }
  return low;
}
#endif

}  // namespace

URT_HOT unsigned cpupri::find_other(priority_t priority, const worker_set* affinity,
                                    unsigned exclude, unsigned rotation) const noexcept {
  const auto n = static_cast<unsigned>(workers_.size());
  if (exclude >= n) return find(priority, affinity, none, none, rotation);
#if URT_CPUPRI_SSE2
  if (layout_ == cpupri_layout::per_llc_bytes && one_line_llcs_) {
    if (!is_valid_priority(priority)) return none;
    return affinity == nullptr
               ? find_bytes<true, false, true>(priority, affinity, none, exclude, rotation)
               : find_bytes<true, true, true>(priority, affinity, none, exclude, rotation);
  }
#endif
  // (first_n cannot throw: n <= max_workers.)
  worker_set others = affinity != nullptr ? *affinity : worker_set::first_n(n);
  others.remove(exclude);
  return others.empty() ? none : find(priority, &others, none, none, rotation);
}

unsigned cpupri::find_portable(priority_t priority, const worker_set* affinity, unsigned from,
                               unsigned last, unsigned rotation) const noexcept {
  if (!is_valid_priority(priority)) return none;
  if (layout_ != cpupri_layout::per_llc_bytes) return find(priority, affinity, from, last, rotation);
  return affinity == nullptr ? find_bytes<false, false>(priority, affinity, from, last, rotation)
                             : find_bytes<false, true>(priority, affinity, from, last, rotation);
}

// Masked: `affinity` is not null (two instantiations, so that the scan of
// a whole machine without affinity tests nothing per LLC for it).
template <bool Simd, bool Masked, bool Exclude>
URT_HOT unsigned cpupri::find_bytes(priority_t priority, const worker_set* affinity, unsigned from,
                                    unsigned last, unsigned rotation) const noexcept {
  [[maybe_unused]] const unsigned exclude = Exclude ? last : none;
  if constexpr (Exclude) last = none;
  const auto n = static_cast<unsigned>(workers_.size());
  const auto allowed = [&](unsigned w) { return w < n && (!Masked || affinity->contains(w)); };
  // Ranks below `limit` are strictly below the task's priority.
  const auto limit = static_cast<std::uint8_t>(slot_of(priority));
  constexpr std::uint8_t no_rank = 255;
  const auto rank_of = [&](unsigned w) {
    // Relaxed; the acquire fence before each return covers the loads.
    return static_cast<std::uint8_t>(value_byte(w).load(std::memory_order_relaxed) - 1);
  };
  const auto done = [](unsigned w) {
    // Acquire: pairs with the release store in set().
    std::atomic_thread_fence(std::memory_order_acquire);
    return w;
  };
  // The task's last worker and the caller, each read once. Idle (rank 0) is
  // the lowest level there is: an idle one of them wins at once.
  const std::uint8_t last_rank = last != from && allowed(last) ? rank_of(last) : no_rank;
  if (last_rank == 0) return done(last);
  const std::uint8_t from_rank = allowed(from) ? rank_of(from) : no_rank;
  if (from_rank == 0) return done(from);
  // An LLC must beat both of them (they win ties at the lowest level), and
  // then every LLC before it in preference order (earlier LLCs win ties).
  std::uint8_t best = std::min({limit, last_rank, from_rank});
  unsigned winner = none;                          // the LLC holding `best`, if one beat them
  std::uint64_t winner_bits[worker_set::words];    // its workers at `best`
  std::uint64_t scratch[worker_set::words];
#if URT_CPUPRI_SSE2
  __m128i below = _mm_set1_epi8(static_cast<char>(best));  // `best` in every byte
#endif
  const byte_span* const spans = spans_.get();
  // Scans LLC g; true when the search is over: an idle worker, which no
  // later LLC can beat (last and caller are not idle).
  const auto visit = [&](unsigned g) {
    const byte_span& s = spans[g];
    std::uint8_t low = 0;
    if constexpr (Simd) {
#if URT_CPUPRI_SSE2
      const unsigned vectors = (s.count + 15) / 16;
      if (vectors <= 4) {  // one line, the usual LLC: inline, from registers
        __m128i rank[4];
        // (An excluded worker outside this LLC: an index past its line.)
        const __m128i lowest =
            load_line<Masked, Exclude>(reinterpret_cast<const volatile __m128i*>(s.bytes), vectors,
                                       affinity, s.first, rank, exclude - s.first);
        if (!any_below(lowest, below)) return false;
        best = min_byte(lowest);
        below = _mm_set1_epi8(static_cast<char>(best));
        winner = g;
        winner_bits[0] = positions(rank, vectors, best);
        return best == 0;
      }
      low = scan_sse2<Masked>(s.bytes, s.first, s.count, affinity, best, below, scratch);
#endif
    } else {
      low = scan_portable(s.bytes, s.first, s.count, Masked ? affinity : nullptr, best, scratch);
    }
    if (low >= best) return false;
    best = low;
#if URT_CPUPRI_SSE2
    if constexpr (Simd) below = _mm_set1_epi8(static_cast<char>(best));
#endif
    winner = g;
    for (unsigned k = 0; k < (s.count + 63) / 64; ++k) winner_bits[k] = scratch[k];
    return low == 0;
  };
  // Preference order (preference_order()'s, without building it): the home
  // LLC, the rest of its NUMA node from the one after it round to the one
  // before it, then the other LLCs in the same round order.
  const auto groups = static_cast<unsigned>(groups_.size());
  if (groups == 1) {
    // One LLC (a small machine, or a runtime on one LLC's CPUs): no order
    // to walk, and no division for the rotation.
    visit(0);
  } else {
    unsigned home = 0;
    if (from < n) {
      home = workers_[from].llc;
    } else {
      home = rotation % groups;
    }
    const group& h = groups_[home];
    const unsigned ranges[4][2] = {
        {home + 1, h.numa_end}, {h.numa_first, home}, {h.numa_end, groups}, {0, h.numa_first}};
    bool over = visit(home);
    for (unsigned r = 0; r < 4 && !over; ++r) {
      for (unsigned g = ranges[r][0]; g < ranges[r][1] && !over; ++g) over = visit(g);
    }
  }
  if (winner != none) return done(pick(groups_[winner], winner_bits, rotation));
  if (last_rank < limit && last_rank <= from_rank) return done(last);
  if (from_rank < limit) return done(from);
  return done(none);
}

}  // namespace urt::detail
