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
    groups_.push_back(group{r, workers_[r.first].numa});
    max_group_words_ = std::max<std::size_t>(max_group_words_, div_up(r.count, 64));
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
  const unsigned per_line = layout == cpupri_layout::per_llc_bytes ? line_bytes : line_bits;
  std::size_t total = 0;
  shard_of_.resize(n);
  for (const range& r : shard_ranges) {
    shard s{r, total, div_up(r.count, per_line)};
    total += s.lines * slots;
    for (unsigned w = r.first; w < r.first + r.count; ++w) {
      shard_of_[w] = static_cast<unsigned>(shards_.size());
    }
    shards_.push_back(s);
  }
  // Value-initialized: every word and byte starts at zero (nobody anywhere).
  if (layout == cpupri_layout::per_llc_bytes) {
    byte_lines_ = std::make_unique<byte_line[]>(total);
  } else {
    lines_ = std::make_unique<line[]>(total);
  }
  levels_ = std::make_unique<padded_level[]>(n);
}

void cpupri::publish(unsigned worker, int slot, bool on) noexcept {
  const shard& s = shards_[shard_of_[worker]];
  const unsigned local = worker - s.workers.first;
  const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
  if (layout_ == cpupri_layout::per_llc_bytes) {
    // A plain store into the worker's own byte: no other writer, no RMW.
    // Release: pairs with the acquire fence in group_bits()/member().
    byte_lines_[at + local / line_bytes].bytes[local % line_bytes].store(
        on ? 1 : 0, std::memory_order_release);
    return;
  }
  std::atomic<std::uint64_t>& word = lines_[at + local / line_bits].words[(local % line_bits) / 64];
  const std::uint64_t bit = std::uint64_t{1} << (local % 64);
  // Shared words: a locked RMW. Release pairs as above.
  if (on) {
    word.fetch_or(bit, std::memory_order_release);
  } else {
    word.fetch_and(~bit, std::memory_order_release);
  }
}

void cpupri::set(unsigned worker, int level) noexcept {
  const int old = levels_[worker].value.load(std::memory_order_relaxed);  // owner-written
  if (old == level) return;
  // Publish the new level before retracting the old one (invariant 2); the
  // second release store cannot become visible before the first.
  if (level != level_invalid) publish(worker, slot_of(level), true);
  if (old != level_invalid) publish(worker, slot_of(old), false);
  levels_[worker].value.store(level, std::memory_order_relaxed);
}

bool cpupri::member(int slot, unsigned worker) const noexcept {
  const shard& s = shards_[shard_of_[worker]];
  const unsigned local = worker - s.workers.first;
  const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
  if (layout_ == cpupri_layout::per_llc_bytes) {
    return byte_lines_[at + local / line_bytes].bytes[local % line_bytes].load(
               std::memory_order_acquire) != 0;
  }
  const std::uint64_t word =
      lines_[at + local / line_bits].words[(local % line_bits) / 64].load(std::memory_order_acquire);
  return ((word >> (local % 64)) & 1) != 0;
}

bool cpupri::group_bits(int slot, const group& g, const worker_set* affinity,
                        std::uint64_t* out) const noexcept {
  const unsigned nwords = div_up(g.workers.count, 64);
  std::fill(out, out + nwords, 0);
  // The group may span shards (an LLC wider than a NUMA node): walk it in
  // runs that each lie within one shard.
  for (unsigned w = g.workers.first; w < g.workers.first + g.workers.count;) {
    const shard& s = shards_[shard_of_[w]];
    const unsigned end = std::min(g.workers.first + g.workers.count, s.workers.first + s.workers.count);
    const std::size_t at = s.base + static_cast<std::size_t>(slot) * s.lines;
    if (layout_ == cpupri_layout::per_llc_bytes) {
      for (unsigned x = w; x < end; ++x) {
        const unsigned local = x - s.workers.first;
        // Relaxed loads; one acquire fence below covers them all.
        if (byte_lines_[at + local / line_bytes].bytes[local % line_bytes].load(
                std::memory_order_relaxed) != 0) {
          const unsigned i = x - g.workers.first;
          out[i / 64] |= std::uint64_t{1} << (i % 64);
        }
      }
    } else {
      const unsigned shard_words = s.lines * (line_bits / 64);
      const auto word = [&](unsigned i) {
        return lines_[at + i / (line_bits / 64)].words[i % (line_bits / 64)].load(
            std::memory_order_relaxed);
      };
      for (unsigned x = w; x < end; x += 64) {
        const unsigned n = std::min(64u, end - x);
        const std::uint64_t bits = bits_at(word, shard_words, x - s.workers.first) & low_mask(n);
        const unsigned i = x - g.workers.first;  // place at bit i of out
        out[i / 64] |= bits << (i % 64);
        if (i % 64 != 0 && i / 64 + 1 < nwords) out[i / 64 + 1] |= bits >> (64 - i % 64);
      }
    }
    w = end;
  }
  // Acquire: pairs with the release stores in publish(), so a retraction
  // seen at this level implies the publication of the level it moved to.
  std::atomic_thread_fence(std::memory_order_acquire);
  std::uint64_t any = 0;
  for (unsigned k = 0; k < nwords; ++k) {
    if (affinity != nullptr) {
      const auto& allowed = affinity->bits();
      out[k] &= bits_at([&](unsigned i) { return allowed[i]; },
                        static_cast<unsigned>(worker_set::words), g.workers.first + 64 * k);
    }
    if (64 * (k + 1) > g.workers.count) out[k] &= low_mask(g.workers.count - 64 * k);
    any |= out[k];
  }
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

unsigned cpupri::find(priority_t priority, const worker_set* affinity, unsigned from,
                      unsigned last, unsigned rotation) const noexcept {
  if (!is_valid_priority(priority)) return none;
  const auto n = static_cast<unsigned>(workers_.size());
  const auto allowed = [&](unsigned w) {
    return w < n && (affinity == nullptr || affinity->contains(w));
  };
  const auto groups = static_cast<unsigned>(groups_.size());
  // The caller's LLC comes first; an outside thread starts at a rotating one.
  const unsigned home = from < n ? workers_[from].llc : rotation % groups;
  const unsigned home_numa = groups_[home].numa;
  std::uint64_t bits[worker_set::words];
  for (int slot = 0; slot < slot_of(priority); ++slot) {  // strictly lower levels only
    if (allowed(last) && member(slot, last)) return last;
    if (allowed(from) && member(slot, from)) return from;
    // Then the caller's LLC, the other LLCs of its NUMA node, the rest,
    // each pass in LLC order starting after the home LLC.
    for (unsigned pass = 0; pass < 3; ++pass) {
      for (unsigned k = 0; k < groups; ++k) {
        const unsigned gi = (home + k) % groups;
        const group& g = groups_[gi];
        const bool wanted = pass == 0 ? gi == home
                            : pass == 1 ? gi != home && g.numa == home_numa
                                        : g.numa != home_numa;
        if (wanted && group_bits(slot, g, affinity, bits)) return pick(g, bits, rotation);
        if (pass == 0) break;
      }
    }
  }
  return none;
}

}  // namespace urt::detail
