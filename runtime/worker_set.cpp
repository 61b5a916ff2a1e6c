#include "urt/worker_set.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>
#include <stdexcept>

#include "messages.hpp"

namespace urt {
namespace {

[[noreturn]] void bad_cpulist(std::string_view field, std::string_view text, std::string_view why) {
  throw std::invalid_argument(std::string(field) + ": " + detail::quoted(text) +
                              " is not a cpulist (" + std::string(why) +
                              "); expected e.g. \"0-3,8\"");
}

// Parses one decimal index at the front of `rest`, advancing it.
unsigned parse_index(std::string_view& rest, std::string_view field, std::string_view text,
                     unsigned limit) {
  unsigned value = 0;
  const auto* first = rest.data();
  const auto* last = rest.data() + rest.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range) bad_cpulist(field, text, "index too large");
  if (ec != std::errc{} || ptr == first) {
    bad_cpulist(field, text,
                rest.empty() ? std::string("missing index at the end")
                             : "unexpected " + detail::quoted(rest.substr(0, 1), '\''));
  }
  if (value > limit) {
    bad_cpulist(field, text, "index " + std::to_string(value) + " exceeds " + std::to_string(limit));
  }
  rest.remove_prefix(static_cast<std::size_t>(ptr - first));
  return value;
}

}  // namespace

std::vector<unsigned> parse_cpulist(std::string_view text, std::string_view field,
                                    unsigned limit) {
  // The ranges first, merged, then expanded: the result holds each index
  // once, so its size is bounded by the limit, however often a text
  // repeats a range ("0-1048576,0-1048576,..." would otherwise expand to
  // a million indexes per ten characters before duplicates are dropped).
  std::vector<std::pair<unsigned, unsigned>> ranges;
  std::string_view rest = text;
  if (rest.empty()) bad_cpulist(field, text, "empty");
  while (true) {
    const unsigned lo = parse_index(rest, field, text, limit);
    unsigned hi = lo;
    if (!rest.empty() && rest.front() == '-') {
      rest.remove_prefix(1);
      hi = parse_index(rest, field, text, limit);
      if (hi < lo) {
        bad_cpulist(field, text,
                    "range " + std::to_string(lo) + "-" + std::to_string(hi) + " is reversed");
      }
    }
    ranges.emplace_back(lo, hi);
    if (rest.empty()) break;
    if (rest.front() != ',') {
      bad_cpulist(field, text, "unexpected " + detail::quoted(rest.substr(0, 1), '\''));
    }
    rest.remove_prefix(1);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<unsigned> out;
  bool any = false;
  unsigned next = 0;  // the first index not yet in `out` (when `any`)
  bool full = false;  // `out` ends at UINT_MAX: nothing can follow
  for (auto [lo, hi] : ranges) {
    if (full) break;
    if (any && hi < next) continue;  // inside what is already out
    if (any && lo < next) lo = next;
    // Stops at hi, not past it: ++i after UINT_MAX would wrap to 0.
    for (unsigned i = lo;; ++i) {
      out.push_back(i);
      if (i == hi) break;
    }
    any = true;
    full = hi == std::numeric_limits<unsigned>::max();
    next = hi + 1;  // wraps only when full
  }
  return out;
}

std::string format_cpulist(const std::vector<unsigned>& indexes) {
  std::string out;
  for (std::size_t i = 0; i < indexes.size();) {
    std::size_t j = i;
    while (j + 1 < indexes.size() && indexes[j + 1] == indexes[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(indexes[i]);
    if (j > i) out += '-' + std::to_string(indexes[j]);
    i = j + 1;
  }
  return out;
}

worker_set::worker_set(std::initializer_list<unsigned> ids) {
  for (unsigned id : ids) add(id);
}

worker_set worker_set::first_n(std::size_t count) {
  if (count > max_workers) {
    throw std::out_of_range("worker_set: " + std::to_string(count) + " workers exceed max_workers " +
                            std::to_string(max_workers));
  }
  worker_set s;
  for (std::size_t w = 0; w < count / word_bits; ++w) s.bits_[w] = ~std::uint64_t{0};
  if (count % word_bits != 0) s.bits_[count / word_bits] = (std::uint64_t{1} << (count % word_bits)) - 1;
  return s;
}

worker_set worker_set::parse(std::string_view text, std::string_view field) {
  worker_set s;
  for (unsigned id : parse_cpulist(text, field, max_workers - 1)) s.add(id);
  return s;
}

void worker_set::add(unsigned id) {
  if (id >= max_workers) {
    throw std::out_of_range("worker_set: worker id " + std::to_string(id) + " exceeds " +
                            std::to_string(max_workers - 1));
  }
  bits_[id / word_bits] |= std::uint64_t{1} << (id % word_bits);
}

void worker_set::remove(unsigned id) {
  if (id < max_workers) bits_[id / word_bits] &= ~(std::uint64_t{1} << (id % word_bits));
}

bool worker_set::empty() const noexcept {
  return std::all_of(bits_.begin(), bits_.end(), [](std::uint64_t w) { return w == 0; });
}

std::size_t worker_set::count() const noexcept {
  std::size_t n = 0;
  for (std::uint64_t w : bits_) n += static_cast<std::size_t>(std::popcount(w));
  return n;
}

unsigned worker_set::next(unsigned from) const noexcept {
  if (from >= max_workers) return max_workers;
  std::size_t w = from / word_bits;
  std::uint64_t word = bits_[w] & (~std::uint64_t{0} << (from % word_bits));
  while (true) {
    if (word != 0) return static_cast<unsigned>(w * word_bits + std::countr_zero(word));
    if (++w == words) return max_workers;
    word = bits_[w];
  }
}

unsigned worker_set::last() const noexcept {
  for (std::size_t w = words; w-- > 0;) {
    if (bits_[w] != 0) {
      return static_cast<unsigned>(w * word_bits + word_bits - 1 - std::countl_zero(bits_[w]));
    }
  }
  return max_workers;
}

std::vector<unsigned> worker_set::ids() const {
  std::vector<unsigned> out;
  for (unsigned id = first(); id < max_workers; id = next(id + 1)) out.push_back(id);
  return out;
}

std::string worker_set::to_string() const { return format_cpulist(ids()); }

worker_set& worker_set::operator&=(const worker_set& other) noexcept {
  for (std::size_t w = 0; w < words; ++w) bits_[w] &= other.bits_[w];
  return *this;
}

worker_set& worker_set::operator|=(const worker_set& other) noexcept {
  for (std::size_t w = 0; w < words; ++w) bits_[w] |= other.bits_[w];
  return *this;
}

}  // namespace urt
