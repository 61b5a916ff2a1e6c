// llc_bytes: one atomic byte per worker, laid out on cache lines by
// last-level cache: each LLC starts a line of its own and its workers fill
// bytes in id order (a line holds at most 64), so that the writes of one
// LLC's workers touch no line another LLC's workers use. The layout of the
// overload mask (overload.hpp), the stranded marks (stranded.hpp) and the
// reschedule requests (resched.hpp); how the bytes are written and read is
// theirs to say.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "urt/topology.hpp"

namespace urt::detail {

/// `workers` workers in one LLC, ids 0..workers-1: the places the unit
/// tests' constructors of the per-LLC structures lay out.
inline std::vector<worker_place> one_llc_places(unsigned workers) {
  std::vector<worker_place> flat(workers);
  for (unsigned w = 0; w < workers; ++w) flat[w].worker = w;
  return flat;
}

class llc_bytes {
 public:
  /// For `workers` (dense ids, each LLC a contiguous id range, as
  /// urt::topology produces); every byte 0.
  explicit llc_bytes(std::span<const worker_place> workers) {
    const auto n = workers.size();
    line_of_.resize(n);
    byte_of_.resize(n);
    std::size_t line = 0;
    unsigned byte = 0;
    for (std::size_t w = 0; w < n; ++w) {
      const bool new_llc = w > 0 && workers[w].llc != workers[w - 1].llc;
      if (w > 0 && (new_llc || byte == line_bytes)) {
        ++line;
        byte = 0;
      }
      line_of_[w] = line;
      byte_of_[w] = static_cast<std::uint8_t>(byte++);
    }
    lines_n_ = n == 0 ? 0 : line + 1;
    lines_ = std::make_unique<byte_line[]>(lines_n_ == 0 ? 1 : lines_n_);  // value-initialized: 0
    used_.assign(lines_n_, 0);
    for (std::size_t w = 0; w < n; ++w) ++used_[line_of_[w]];
  }

  /// Worker w's byte.
  [[nodiscard]] std::atomic<std::uint8_t>& operator[](std::size_t w) const noexcept {
    return lines_[line_of_[w]].bytes[byte_of_[w]];
  }
  /// Where worker w's byte lies: its line, and its index in the line.
  [[nodiscard]] std::size_t line_of(std::size_t w) const noexcept { return line_of_[w]; }
  [[nodiscard]] unsigned byte_of(std::size_t w) const noexcept { return byte_of_[w]; }
  /// The lines, for a scan of every byte (bytes past an LLC's last worker
  /// stay 0).
  [[nodiscard]] std::size_t lines() const noexcept { return lines_n_; }
  [[nodiscard]] std::span<const std::atomic<std::uint8_t>> line(std::size_t l) const noexcept {
    return lines_[l].bytes;
  }
  /// Line l's workers' bytes only (the first ones of the line): what a scan
  /// for set bytes needs to look at. Two workers in one LLC look at 2 bytes,
  /// not 64.
  [[nodiscard]] std::span<const std::atomic<std::uint8_t>> used(std::size_t l) const noexcept {
    return std::span<const std::atomic<std::uint8_t>>(lines_[l].bytes).first(used_[l]);
  }

  static constexpr unsigned line_bytes = 64;

 private:
  struct alignas(64) byte_line {
    std::atomic<std::uint8_t> bytes[line_bytes];
  };
  std::vector<std::size_t> line_of_;   // worker -> its byte's line
  std::vector<std::uint8_t> byte_of_;  // worker -> its byte within the line
  std::vector<std::uint8_t> used_;     // line -> how many workers' bytes it holds
  std::size_t lines_n_ = 0;
  std::unique_ptr<byte_line[]> lines_;
};

}  // namespace urt::detail
