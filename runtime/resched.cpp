#include "resched.hpp"

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

void resched_requests::request(unsigned w, int p) noexcept {
  std::atomic<std::uint8_t>& b = bytes_[w];
  const auto want = static_cast<std::uint8_t>(p);
  std::uint8_t seen = b.load(std::memory_order_relaxed);
  // Release: pairs with clear()'s and claim_above()'s acquire RMWs, which
  // then see the push that came before this (see the header).
  while (seen < want &&
         !b.compare_exchange_weak(seen, want, std::memory_order_release,
                                  std::memory_order_relaxed)) {
  }
  if (seen == 0) count_.value.fetch_add(1, std::memory_order_relaxed);
}

unsigned resched_requests::claim_above(int level, unsigned self) noexcept {
  const std::size_t lines = bytes_.lines();
  if (lines == 0 || self >= n_) return none;
  const std::size_t first = bytes_.line_of(self);
  for (std::size_t k = 0; k < lines; ++k) {
    const std::size_t l = (first + k) % lines;
    const auto line = bytes_.line(l);
    for (unsigned i = 0; i < llc_bytes::line_bytes; ++i) {
      std::uint8_t seen = line[i].load(std::memory_order_relaxed);
      if (seen == 0 || static_cast<int>(seen) <= level) continue;
      const unsigned w = worker_at_[l * llc_bytes::line_bytes + i];
      if (w == self || w == none) continue;
      // Acquire: pairs with request()'s release CAS (see the header). A
      // failed CAS means another claimer, the owner or a raise came first:
      // look at the next worker.
      if (bytes_[w].compare_exchange_strong(seen, 0, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
        count_.value.fetch_sub(1, std::memory_order_relaxed);
        return w;
      }
    }
  }
  return none;
}

}  // namespace urt::detail
