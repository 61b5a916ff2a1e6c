#include "resched.hpp"

#include <algorithm>

#include "hot.hpp"

namespace urt::detail {

resched_requests::resched_requests(std::span<const worker_place> workers)
    : n_(static_cast<unsigned>(workers.size())),
      bytes_(workers),
      worker_at_(bytes_.lines() * llc_bytes::line_bytes, none) {
  for (unsigned w = 0; w < n_; ++w) {
    worker_at_[bytes_.line_of(w) * llc_bytes::line_bytes + bytes_.byte_of(w)] = w;
  }
}

resched_requests::resched_requests(unsigned workers) : resched_requests(one_llc_places(workers)) {}

URT_HOT void resched_requests::request(unsigned w, int p) noexcept {
  std::atomic<std::uint8_t>& b = bytes_[w];
  const auto want = static_cast<std::uint8_t>(p);
  std::uint8_t seen = b.load(std::memory_order_relaxed);
  if (seen >= want) return;  // asked for already, at p or above
  // Counted and top raised before the byte: the count never falls short of
  // the bytes set (see the header).
  update(+1, want);
  // Release: pairs with clear()'s and claim_above()'s acquire RMWs, which
  // then see the push that came before this (see the header).
  while (seen < want &&
         !b.compare_exchange_weak(seen, want, std::memory_order_release,
                                  std::memory_order_relaxed)) {
  }
  if (seen != 0) uncount();  // the byte was set already: counted by whoever set it
}

URT_HOT void resched_requests::update(std::int32_t delta, std::uint8_t p) noexcept {
  // Relaxed: the summary is a hint (pending_above()); the bytes' RMWs carry
  // the ordering.
  std::uint64_t w = summary_.word.load(std::memory_order_relaxed);
  summary next;
  do {
    const summary s = summary::of(w);
    next.count = s.count + delta;
    next.top = next.count <= 0 ? std::uint8_t{0} : std::max(s.top, p);
  } while (!summary_.word.compare_exchange_weak(w, next.word(), std::memory_order_relaxed,
                                                std::memory_order_relaxed));
}

URT_HOT unsigned resched_requests::claim_above(int level, unsigned self) noexcept {
  const std::size_t lines = bytes_.lines();
  if (lines == 0 || self >= n_) return none;
  const std::uint64_t before = summary_.word.load(std::memory_order_relaxed);
  const summary s = summary::of(before);
  if (s.count <= 0 || static_cast<int>(s.top) <= level) return none;
  // What the scan saw, for the repair of a stale top below.
  std::int32_t set = 0;
  std::uint8_t highest = 0;
  const std::size_t first = bytes_.line_of(self);
  for (std::size_t k = 0; k < lines; ++k) {
    const std::size_t l = (first + k) % lines;
    const auto line = bytes_.used(l);
    for (unsigned i = 0; i < line.size(); ++i) {
      std::uint8_t seen = line[i].load(std::memory_order_relaxed);
      if (seen == 0) continue;
      ++set;
      highest = std::max(highest, seen);
      if (static_cast<int>(seen) <= level) continue;
      const unsigned w = worker_at_[l * llc_bytes::line_bytes + i];
      if (w == self || w == none) continue;
      // Acquire: pairs with request()'s release CAS (see the header). A
      // failed CAS means another claimer, the owner or a raise came first:
      // look at the next worker.
      if (bytes_[w].compare_exchange_strong(seen, 0, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
        uncount();
        return w;
      }
    }
  }
  // Nothing to claim. When the summary has not changed since before the
  // scan and the scan saw as many bytes set as it counts, no request was in
  // flight (each counts itself before it sets its byte, and takes itself
  // off after its byte is cleared), so the highest byte seen is the true
  // top: lower a stale one, so that the next claimers skip the scan. Any
  // update meanwhile fails the CAS, and the top stays as it was.
  if (set == s.count && highest < s.top) {
    std::uint64_t expected = before;
    summary_.word.compare_exchange_strong(expected, summary{s.count, highest}.word(),
                                          std::memory_order_relaxed, std::memory_order_relaxed);
  }
  return none;
}

}  // namespace urt::detail
