#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "node_pool.hpp"

namespace urt::detail::node_pool {
namespace {

// The shared depot: a stack of free node pointers, and every chunk ever
// allocated (freed at process exit, so a leaked runtime leaks nothing).
// Magazines hold pointers, not linked nodes: taking a node never reads the
// node itself, whose cache lines were last written on another core.
class depot {
 public:
  static depot& instance() {
    static depot d;
    return d;
  }
  // Fills out[0..n) with free nodes, n <= pool_batch; grows by one chunk
  // when empty. Throws std::bad_alloc only while growing.
  std::size_t take(task_node** out) {
    std::lock_guard lock(mutex_);
    if (free_.empty()) grow();
    const std::size_t n = std::min(pool_batch, free_.size());
    std::copy(free_.end() - static_cast<std::ptrdiff_t>(n), free_.end(), out);
    free_.resize(free_.size() - n);
    return n;
  }
  // Takes back n nodes. Never allocates: free_ has room for every node.
  void give(task_node* const* in, std::size_t n) noexcept {
    std::lock_guard lock(mutex_);
    free_.insert(free_.end(), in, in + n);
  }
  depot_shape shape() noexcept {
    std::lock_guard lock(mutex_);
    return {chunks_.size(), chunks_.capacity(), free_.capacity()};
  }

 private:
  void grow() {
    // Everything that may throw comes first: a failed grow changes nothing
    // but spare capacity. Both lists double when full (amortized O(1) per
    // chunk); reserving just one more chunk copied the whole chunk list
    // under the mutex on every grow, quadratic in the pool's size.
    auto block = std::make_unique<task_node[]>(pool_batch);
    const std::size_t nodes = (chunks_.size() + 1) * pool_batch;
    if (free_.capacity() < nodes) free_.reserve(std::max(nodes, 2 * free_.capacity()));
    if (chunks_.size() == chunks_.capacity()) {
      chunks_.reserve(std::max<std::size_t>(16, 2 * chunks_.capacity()));
    }
    for (std::size_t i = pool_batch; i-- > 0;) free_.push_back(&block[i]);
    chunks_.push_back(std::move(block));
  }

  std::mutex mutex_;
  std::vector<task_node*> free_;
  std::vector<std::unique_ptr<task_node[]>> chunks_;
};

// The calling thread's magazine: at most 2 * pool_batch node pointers.
struct magazine {
  depot& home = depot::instance();  // constructed first, so destroyed after us
  std::size_t count = 0;
  task_node* slots[2 * pool_batch];
  ~magazine() { home.give(slots, count); }
};

magazine& local() {
  thread_local magazine m;
  return m;
}

}  // namespace

task_node* allocate() {
  magazine& m = local();
  if (m.count == 0) m.count = m.home.take(m.slots);
  task_node* node = m.slots[--m.count];
  if (m.count > 0) {
    // The next node's lines were last written by the worker that ran it:
    // request them for writing now, so the next spawn does not stall.
    __builtin_prefetch(m.slots[m.count - 1], 1);
    __builtin_prefetch(reinterpret_cast<const char*>(m.slots[m.count - 1]) + 64, 1);
  }
  return node;
}

depot_shape shape() noexcept { return depot::instance().shape(); }

void release(task_node* node) noexcept {
  magazine& m = local();
  if (m.count == 2 * pool_batch) {
    m.home.give(m.slots + pool_batch, pool_batch);
    m.count = pool_batch;
  }
  m.slots[m.count++] = node;
}

}  // namespace urt::detail::node_pool
