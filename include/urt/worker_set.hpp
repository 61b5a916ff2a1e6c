// urt/worker_set.hpp: sets of worker ids and the cpulist syntax ("0-3,8").
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace urt {

/// Largest number of workers one runtime can have. A worker_set is a fixed
/// bitset of this many bits so that a task carries its affinity inline (no
/// allocation per spawn) and mask operations are a handful of word ops.
inline constexpr std::size_t max_workers = 1024;

/// Parses a cpulist ("0-3,8", "1,3-5", "7") into a sorted list of distinct
/// indexes. `field` names the option being parsed; on a syntax error, a
/// reversed range or an index above `limit` it throws std::invalid_argument
/// whose message names the field and quotes the text. Thread-safe.
std::vector<unsigned> parse_cpulist(std::string_view text, std::string_view field,
                                    unsigned limit = 1u << 20);

/// Formats sorted indexes back into the shortest cpulist ("0-3,8").
std::string format_cpulist(const std::vector<unsigned>& indexes);

/// A set of worker ids 0..max_workers-1. A plain value type; not thread-safe
/// for concurrent mutation, any number of concurrent readers.
class worker_set {
 public:
  static constexpr std::size_t word_bits = 64;
  static constexpr std::size_t words = max_workers / word_bits;

  constexpr worker_set() = default;
  /// The set holding exactly `ids`; an id >= max_workers throws std::out_of_range.
  worker_set(std::initializer_list<unsigned> ids);

  /// The ids 0..count-1.
  static worker_set first_n(std::size_t count);
  /// Parses a cpulist of worker ids; errors name `field`.
  static worker_set parse(std::string_view text, std::string_view field = "worker_set");

  void add(unsigned id);
  void remove(unsigned id);
  [[nodiscard]] bool contains(unsigned id) const noexcept {
    return id < max_workers && ((bits_[id / word_bits] >> (id % word_bits)) & 1u) != 0;
  }
  [[nodiscard]] bool empty() const noexcept;
  [[nodiscard]] std::size_t count() const noexcept;
  /// Smallest id in the set, or max_workers when empty.
  [[nodiscard]] unsigned first() const noexcept { return next(0); }
  /// Smallest id >= from in the set, or max_workers when there is none.
  [[nodiscard]] unsigned next(unsigned from) const noexcept;
  /// Largest id in the set, or max_workers when empty.
  [[nodiscard]] unsigned last() const noexcept;
  /// The ids in increasing order.
  [[nodiscard]] std::vector<unsigned> ids() const;
  /// The set as a cpulist ("0-3,8"), or "" when empty.
  [[nodiscard]] std::string to_string() const;

  worker_set& operator&=(const worker_set& other) noexcept;
  worker_set& operator|=(const worker_set& other) noexcept;
  friend worker_set operator&(worker_set a, const worker_set& b) noexcept { return a &= b; }
  friend worker_set operator|(worker_set a, const worker_set& b) noexcept { return a |= b; }
  friend bool operator==(const worker_set&, const worker_set&) = default;

  [[nodiscard]] const std::array<std::uint64_t, words>& bits() const noexcept { return bits_; }

 private:
  std::array<std::uint64_t, words> bits_{};
};

}  // namespace urt
