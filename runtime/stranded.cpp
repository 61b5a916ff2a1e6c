#include "stranded.hpp"

namespace urt::detail {

stranded_marks::stranded_marks(unsigned workers)
    : n_(workers),
      words_n_((workers + 63) / 64),
      words_(std::make_unique<std::atomic<std::uint64_t>[]>(words_n_)),
      slots_(std::make_unique<slot[]>(workers)) {}

bool stranded_marks::any() const noexcept {
  for (unsigned i = 0; i < words_n_; ++i) {
    if (words_[i].load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

unsigned stranded_marks::next(unsigned after, unsigned self) const noexcept {
  // Words from the one holding `after`, wrapping around once; in the first
  // word only bits above `after`, in the last pass only bits up to it.
  const unsigned start = after == none || after >= n_ ? n_ - 1 : after;
  for (unsigned k = 0; k <= words_n_; ++k) {
    const unsigned wi = (start / 64 + k) % words_n_;
    std::uint64_t v = words_[wi].load(std::memory_order_relaxed);
    if (k == 0) {
      const unsigned b = start % 64;
      v = b == 63 ? 0 : v & ~((std::uint64_t{2} << b) - 1);  // above `start` only
    }
    if (k == words_n_) {
      const unsigned b = start % 64;
      v &= b == 63 ? ~std::uint64_t{0} : (std::uint64_t{2} << b) - 1;  // up to `start`
    }
    while (v != 0) {
      const unsigned w = wi * 64 + static_cast<unsigned>(std::countr_zero(v));
      if (w != self && w < n_) return w;
      v &= v - 1;
    }
  }
  return none;
}

stranded_watch::plan stranded_watch::before_idle(const stranded_marks& marks,
                                                 clock::time_point now) noexcept {
  plan p;
  if (!marks.any()) {
    watched_ = stranded_marks::none;
    return p;
  }
  // Keep watching the same worker while it stays marked; else the next one.
  unsigned w = watched_;
  if (w == stranded_marks::none || !marks.marked(w) || w == self_) {
    w = marks.next(watched_ == stranded_marks::none ? self_ : watched_, self_);
  }
  if (w == stranded_marks::none) {
    watched_ = stranded_marks::none;
    return p;
  }
  const std::uint64_t points = marks.points(w);
  if (w != watched_ || points != watched_points_) {
    // A new worker to watch, or it took a scheduling point since: from now.
    watched_ = w;
    watched_points_ = points;
    due_ = now + patience_;
  }
  if (now < due_) {
    p.check = due_;
    return p;
  }
  // No scheduling point for `patience` with its mark set: take it over.
  // Still stuck, it may collect more: the next take-over of it is another
  // `patience` away (so a stuck inbox whose head is a timed node, which
  // only its owner can take, costs a watcher one look per patience).
  due_ = now + patience_;
  p.take_over = w;
  return p;
}

}  // namespace urt::detail
