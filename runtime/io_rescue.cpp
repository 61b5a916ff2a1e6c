#include "io_rescue.hpp"

#include <algorithm>

#include "clock_now.hpp"
#include "hot.hpp"

namespace urt::detail {

URT_HOT io_watch::plan io_watch::before_idle(
    const io_peers& peers, function_ref<clock::time_point()> read_clock) noexcept {
  return look(peers, read_clock, span_);
}

URT_HOT io_watch::plan io_watch::busy_look(const io_peers& peers, clock::time_point now) noexcept {
  // Saturates as stale_at below: half of patience is at most max_wait.
  next_busy_look_ = saturating_add(now, patience_ / 2);
  const auto at_now = [now] { return now; };
  return look(peers, at_now, busy_span);
}

URT_HOT io_watch::plan io_watch::look(const io_peers& peers,
                                      function_ref<clock::time_point()> read_clock,
                                      unsigned span) noexcept {
  plan p;
  const unsigned n = peers.worker_count();
  if (n < 2) return p;
  const unsigned visits = std::min(span, n - 1);
  unsigned w = next_ % n;
  unsigned seen = 0;
  clock::time_point now{};
  bool have_now = false;
  while (seen < visits) {
    if (w != self_) {
      ++seen;
      const io_peers::state s = peers.look(w);
      if (s.candidate) {
        // Saturates: a last look within `patience` of the clock's end is
        // never stale (patience is at most max_wait, so this is far away).
        const clock::time_point stale_at = saturating_add(s.last_look, patience_);
        if (!have_now) {
          now = read_clock();
          have_now = true;
        }
        if (now >= stale_at) {
          p.rescue = w;
          p.check = saturating_add(now, recheck_);
          next_ = w;  // if it stays stuck, polled again at the next look
          return p;
        }
        p.check = std::min(p.check, stale_at);
      }
    }
    w = w + 1 == n ? 0 : w + 1;
  }
  next_ = w;  // nothing rescued: the next look starts after this one
  return p;
}

}  // namespace urt::detail
