#include "overload.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "hot.hpp"

namespace urt::detail {

overload_mask::overload_mask(std::span<const worker_place> workers)
    : n_(static_cast<unsigned>(workers.size())), flags_(checked(workers)) {}

std::span<const worker_place> overload_mask::checked(std::span<const worker_place> workers) {
  if (workers.empty() || workers.size() > max_workers) {
    throw std::invalid_argument("overload_mask: " + std::to_string(workers.size()) +
                                " workers (need 1.." + std::to_string(max_workers) + ")");
  }
  return workers;
}

URT_HOT void overload_mask::set(unsigned w, int top) noexcept {
  std::atomic<std::uint8_t>& f = flag(w);
  const auto value = static_cast<std::uint8_t>(top < 0 ? 0 : top + 1);
  // Relaxed: the byte has one writer at a time (the holder of w's queue
  // lock), and the lock orders successive writers.
  const std::uint8_t old = f.load(std::memory_order_relaxed);
  if (old == value) return;
  if (old == 0) {
    // Entering overload: the flag first, then the count (kernel
    // rt_set_overload: the mask, a write barrier, then rto_count), so a
    // reader that sees the count through any() sees the flag. Release:
    // pairs with the acquire load in top().
    f.store(value, std::memory_order_release);
    // seq_cst RMW: pairs with the acquire load in any(); it is also the
    // full barrier between this publication and the owner's later cpupri
    // reads in push (the Dekker pair with the fence a lowering worker runs
    // in worker::step() when it lowers: one of the two sees the other).
    count_.fetch_add(1, std::memory_order_seq_cst);
  } else if (value == 0) {
    // Kernel rt_clear_overload: the count first, then the mask. Pairs with
    // the acquire load in any().
    count_.fetch_sub(1, std::memory_order_seq_cst);
    f.store(0, std::memory_order_release);
  } else {
    // A new most urgent pushable priority: release pairs with top(); the
    // fence is the same Dekker pair as the RMW above.
    f.store(value, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

URT_HOT int overload_mask::top(unsigned w) const noexcept {
  // Acquire: pairs with the release stores in set().
  return static_cast<int>(flag(w).load(std::memory_order_acquire)) - 1;
}

URT_HOT unsigned overload_mask::best_above(int level, unsigned self) const noexcept {
  unsigned best = none;
  int best_top = level;
  for (unsigned w = next(none); w != none; w = next(w)) {
    if (w == self) continue;
    if (const int t = top(w); t > best_top) {
      best = w;
      best_top = t;
    }
  }
  return best;
}

unsigned overload_mask::next(unsigned after) const noexcept {
  for (unsigned w = after == none ? 0 : after + 1; w < n_; ++w) {
    if (test(w)) return w;
  }
  return none;
}

unsigned push_token::next_target(unsigned sender, const overload_mask& mask) noexcept {
  for (;;) {
    unsigned w = mask.next(pos_);
    if (w == sender) w = mask.next(w);  // never to the sender itself
    pos_ = w;
    if (w != none) return w;
    // End of a round: start another only if requests came in meanwhile.
    // Acquire: pairs with the release increment in request().
    const std::uint64_t requested = requests_.load(std::memory_order_acquire);
    if (requested == rounds_seen_) return none;
    rounds_seen_ = requested;
  }
}

push_token::hop push_token::send(unsigned target, std::int64_t now_ns) noexcept {
  // Relaxed: hints for hop_deadline()/holder(); the authoritative state
  // is under lock_.
  hop_sent_ns_.store(now_ns, std::memory_order_relaxed);
  hop_target_.store(target, std::memory_order_relaxed);
  if (target == none) return hop{};
  return hop{target, ++seq_};
}

URT_HOT push_token::hop push_token::request(unsigned self, const overload_mask& mask,
                                            std::int64_t now_ns) noexcept {
  // Release: pairs with the acquire load in next_target(), so a round that
  // sees this request also sees the overload flags set before it.
  requests_.fetch_add(1, std::memory_order_release);
  // Only one requester starts the token; the others' requests are served by
  // the round their increment triggers. Acquire: pairs with the release
  // store below of the previous starter.
  if (starting_.exchange(true, std::memory_order_acquire)) return hop{};
  hop h;
  lock_.lock();
  if (pos_ == none && hop_target_.load(std::memory_order_relaxed) == none) {
    rounds_seen_ = requests_.load(std::memory_order_relaxed);
    h = send(next_target(self, mask), now_ns);
  }
  lock_.unlock();
  starting_.store(false, std::memory_order_release);  // pairs with the exchange above
  return h;
}

push_token::hop push_token::forward(unsigned self, std::uint64_t seq, const overload_mask& mask,
                                    std::int64_t now_ns) noexcept {
  hop h;
  lock_.lock();
  if (seq == seq_ && hop_target_.load(std::memory_order_relaxed) == self) {
    h = send(next_target(self, mask), now_ns);
  }
  lock_.unlock();
  return h;
}

push_token::takeover push_token::take_over_stuck(unsigned self, const overload_mask& mask,
                                                 std::int64_t now_ns,
                                                 std::int64_t timeout_ns) noexcept {
  takeover t;
  lock_.lock();
  const unsigned stuck = hop_target_.load(std::memory_order_relaxed);
  if (stuck != none && stuck != self &&
      now_ns - hop_sent_ns_.load(std::memory_order_relaxed) >= timeout_ns) {
    t.stuck = stuck;
    // As if the stuck worker had forwarded it: its own late forward() sees
    // a newer seq and does nothing.
    t.next = send(next_target(self, mask), now_ns);
  }
  lock_.unlock();
  return t;
}

std::int64_t push_token::hop_deadline(std::int64_t timeout_ns) const noexcept {
  if (hop_target_.load(std::memory_order_relaxed) == none) {
    return std::numeric_limits<std::int64_t>::max();
  }
  return hop_sent_ns_.load(std::memory_order_relaxed) + timeout_ns;
}

}  // namespace urt::detail
