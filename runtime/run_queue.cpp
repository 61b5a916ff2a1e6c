#include "run_queue.hpp"

#include "hot.hpp"

namespace urt::detail {

run_queue::run_queue() noexcept {
  for (auto& head : heads_) head.next = head.prev = &head;
}

void run_queue::mark(int level) noexcept {
  const unsigned bit = bit_of(level);
  bitmap_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  if (level > top_) top_ = level;
}

void run_queue::unmark_if_empty(int level) noexcept {
  rq_link& head = heads_[static_cast<std::size_t>(level)];
  if (head.next == &head) {
    const unsigned bit = bit_of(level);
    bitmap_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
    if (level == top_) top_ = scan_top();
  }
}

URT_HOT void run_queue::push_back(rq_link* e, int level) noexcept {
  rq_link& head = heads_[static_cast<std::size_t>(level)];
  e->level = static_cast<std::uint8_t>(level);
  e->next = &head;
  e->prev = head.prev;
  head.prev->next = e;
  head.prev = e;
  mark(level);
  ++size_;
}

void run_queue::push_front(rq_link* e, int level) noexcept {
  rq_link& head = heads_[static_cast<std::size_t>(level)];
  e->level = static_cast<std::uint8_t>(level);
  e->prev = &head;
  e->next = head.next;
  head.next->prev = e;
  head.next = e;
  mark(level);
  ++size_;
}

URT_HOT void run_queue::remove(rq_link* e) noexcept {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->next = e->prev = nullptr;
  unmark_if_empty(e->level);
  --size_;
}

URT_HOT rq_link* run_queue::pop() noexcept {
  rq_link* e = peek();
  if (e != nullptr) remove(e);
  return e;
}

std::size_t run_queue::size_at(int level) const noexcept {
  std::size_t n = 0;
  const rq_link& head = heads_[static_cast<std::size_t>(level)];
  for (const rq_link* e = head.next; e != &head; e = e->next) ++n;
  return n;
}

}  // namespace urt::detail
