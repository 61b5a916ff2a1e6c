#include "stranded.hpp"

#include "hot.hpp"

namespace urt::detail {

stranded_marks::stranded_marks(std::span<const worker_place> workers)
    : n_(static_cast<unsigned>(workers.size())),
      marks_(workers),
      slots_(std::make_unique<slot[]>(workers.empty() ? 1 : workers.size())) {}

stranded_marks::stranded_marks(unsigned workers) : stranded_marks(one_llc_places(workers)) {}

URT_HOT bool stranded_marks::any() const noexcept {
  for (std::size_t l = 0; l < marks_.lines(); ++l) {
    for (const auto& b : marks_.used(l)) {
      if (b.load(std::memory_order_relaxed) != 0) return true;
    }
  }
  return false;
}

URT_HOT unsigned stranded_marks::next(unsigned after, unsigned self) const noexcept {
  if (n_ == 0) return none;
  // From the worker after `after` round to `after` itself (from worker 0
  // when `after` is none).
  const unsigned first = after == none || after >= n_ ? 0 : (after + 1) % n_;
  for (unsigned k = 0; k < n_; ++k) {
    const unsigned w = (first + k) % n_;
    if (w != self && marked(w)) return w;
  }
  return none;
}

URT_HOT stranded_watch::plan stranded_watch::before_idle(const stranded_marks& marks,
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
