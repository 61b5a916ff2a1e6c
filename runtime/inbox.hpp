// inbox: a worker's remote submission queue, liburcu's wait-free
// concurrent queue (wfcqueue) of task nodes, with a private splice list on
// the owner's side.
//
// Concurrency (the wfcqueue model: any number of enqueuers, one dequeuer):
//   | may run with ->  | push (any thread) | take (owner) | pending (owner) |
//   |------------------|-------------------|--------------|-----------------|
//   | push             | yes               | yes          | yes             |
//   | take             | yes               | owner only   | owner only      |
// push() is wait-free and publishes everything written to the node before
// it (the enqueue is a full barrier; drain's dequeue depends on its loads).
// take() uses only the non-blocking wfcqueue calls: the blocking ones wait
// for an enqueuer preempted between its tail exchange and its link store
// by spinning, then sleeping 10 ms per round, which no real-time worker can
// afford. A node whose enqueue is still in flight is taken at a later
// scheduling point instead; pending() reports it meanwhile, and its
// pusher rings the owner's doorbell once it is linked.
#pragma once

#include <urcu/wfcqueue.h>

#include <cstddef>

#include "task_node.hpp"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace urt::detail {

class inbox {
 public:
  inbox() noexcept {
    __cds_wfcq_init(&head_, &tail_);
    __cds_wfcq_init(&spliced_head_, &spliced_tail_);
  }
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;

  /// Any thread: appends `node`. The caller then rings the owner.
  void push(task_node* node) noexcept {
    cds_wfcq_node_init(&node->inbox);
#if defined(__SANITIZE_THREAD__)
    __tsan_release(node);  // TSAN cannot see liburcu's atomics: pairs with take()
#endif
    cds_wfcq_enqueue(__cds_wfcq_head_cast(&head_), &tail_, &node->inbox);
  }

  /// Owner: calls `f(node)` for every node whose enqueue has completed, in
  /// arrival order; returns how many.
  template <class F>
  std::size_t take(F&& f) noexcept {
    cds_wfcq_node* first = __cds_wfcq_first_nonblocking(__cds_wfcq_head_cast(&head_), &tail_);
    if (first != nullptr && first != would_block()) {
      // The first link is in place, so this cannot return WOULDBLOCK.
      __cds_wfcq_splice_nonblocking(__cds_wfcq_head_cast(&spliced_head_), &spliced_tail_,
                                    __cds_wfcq_head_cast(&head_), &tail_);
    }
    std::size_t taken = 0;
    for (;;) {
      cds_wfcq_node* link =
          __cds_wfcq_dequeue_nonblocking(__cds_wfcq_head_cast(&spliced_head_), &spliced_tail_);
      if (link == nullptr || link == would_block()) break;
      task_node* node = task_node::from_inbox(link);
#if defined(__SANITIZE_THREAD__)
      __tsan_acquire(node);  // pairs with push()
#endif
      // The captures' line was written by the spawner on another core: start
      // fetching it now, so the miss overlaps the rest of the walk.
      __builtin_prefetch(node->payload.storage);
      f(node);
      ++taken;
    }
    return taken;
  }

  /// Owner: whether a node is queued, or its enqueue is in flight (the
  /// step that follows takes it once it is linked). Safe against
  /// concurrent pushes.
  [[nodiscard]] bool pending() const noexcept {
    auto* head = const_cast<__cds_wfcq_head*>(&head_);                // the C API is not const
    auto* spliced = const_cast<__cds_wfcq_head*>(&spliced_head_);     // likewise
    return !cds_wfcq_empty(__cds_wfcq_head_cast(head), const_cast<cds_wfcq_tail*>(&tail_)) ||
           !cds_wfcq_empty(__cds_wfcq_head_cast(spliced),
                           const_cast<cds_wfcq_tail*>(&spliced_tail_));
  }

 private:
  // liburcu's CDS_WFCQ_WOULDBLOCK, without its C-style cast.
  static cds_wfcq_node* would_block() noexcept {
    return reinterpret_cast<cds_wfcq_node*>(-1L);
  }

  // The owner's side: nodes spliced out, not yet taken.
  __cds_wfcq_head spliced_head_{};
  cds_wfcq_tail spliced_tail_{};
  // Producers touch the tail, the owner the head: lines of their own.
  alignas(64) cds_wfcq_tail tail_{};
  alignas(64) __cds_wfcq_head head_{};
};

}  // namespace urt::detail
