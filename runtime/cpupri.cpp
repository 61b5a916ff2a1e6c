#include "cpupri.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

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
    groups_.push_back(group{r, workers_[r.first].numa, {}});
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

void cpupri::set_bits(unsigned worker, int level) noexcept {
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

unsigned cpupri::find(priority_t priority, const worker_set* affinity, unsigned from,
                      unsigned last, unsigned rotation) const noexcept {
  if (!is_valid_priority(priority)) return none;
  if (layout_ == cpupri_layout::per_llc_bytes) return find_bytes(priority, affinity, from, last, rotation);
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

// per_llc_bytes: each worker's level is one byte, so instead of scanning
// level by level, read each LLC's line of bytes once: the lowest level is
// the minimum byte. Idle is the lowest level there is, so an idle worker
// found early ends the search at the first line.
unsigned cpupri::find_bytes(priority_t priority, const worker_set* affinity, unsigned from,
                            unsigned last, unsigned rotation) const noexcept {
  const auto n = static_cast<unsigned>(workers_.size());
  const auto allowed = [&](unsigned w) {
    return w < n && (affinity == nullptr || affinity->contains(w));
  };
  // Byte values: 0 invalid, 1 idle, slot + 1 for a priority; a candidate is
  // 1..limit, i.e. strictly below the task's priority.
  const auto limit = static_cast<std::uint8_t>(slot_of(priority));
  constexpr std::uint8_t idle_value = 1;
  const auto value = [&](unsigned w) {
    // Relaxed; the acquire fence before each return covers the loads.
    return value_byte(w).load(std::memory_order_relaxed);
  };
  const auto candidate = [&](std::uint8_t v) { return v != 0 && v <= limit; };
  const bool check_last = last != from && allowed(last);
  const bool check_from = allowed(from);
  const auto done = [](unsigned w) {
    // Acquire: pairs with the release store in set().
    std::atomic_thread_fence(std::memory_order_acquire);
    return w;
  };
  const auto groups = static_cast<unsigned>(groups_.size());
  const unsigned home = from < n ? workers_[from].llc : rotation % groups;
  // One read of a group's bytes, in rotation order: its lowest candidate
  // value (0: none) and the first worker holding it. Answers come from
  // these reads and are never re-read, so a worker that was a candidate
  // when read cannot vanish between two reads (invariant 2).
  struct low {  // no default member initializers: lows[] below stays uninitialized
    std::uint8_t value;
    unsigned worker;
  };
  const auto scan = [&](const group& g) {
    low best{0, none};
    const unsigned count = g.workers.count;
    const unsigned start = count == 1 ? 0 : rotation % count;  // one division per LLC
    for (unsigned k = 0, i = start; k < count; ++k, i = i + 1 == count ? 0 : i + 1) {
      const unsigned w = g.workers.first + i;
      const std::uint8_t v = value(w);
      if (candidate(v) && (best.value == 0 || v < best.value) && allowed(w)) {
        best = low{v, w};
        if (v == idle_value) break;  // cannot go lower
      }
    }
    return best;
  };
  // Idle is the lowest level there is: an idle last worker or caller wins
  // at once, and so does the first LLC (in preference order) with an idle
  // worker, since last and caller are then known not to be idle.
  if (check_last && value(last) == idle_value) return done(last);
  if (check_from && value(from) == idle_value) return done(from);
  // The home LLC first, on its own: the whole order is only needed when it
  // has no idle worker.
  low lows[max_workers];
  lows[0] = scan(groups_[home]);
  if (lows[0].value == idle_value) return done(lows[0].worker);
  std::uint8_t lowest = lows[0].value;
  unsigned order[max_workers];
  const unsigned count = preference_order(home, order);  // order[0] == home
  for (unsigned i = 1; i < count; ++i) {
    lows[i] = scan(groups_[order[i]]);
    if (lows[i].value == idle_value) return done(lows[i].worker);
    if (lows[i].value != 0 && (lowest == 0 || lows[i].value < lowest)) lowest = lows[i].value;
  }
  if (lowest == 0) return done(none);
  if (check_last && value(last) == lowest) return done(last);
  if (check_from && value(from) == lowest) return done(from);
  for (unsigned i = 0; i < count; ++i) {
    if (lows[i].value == lowest) return done(lows[i].worker);
  }
  return done(none);
}

}  // namespace urt::detail
