#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "hot.hpp"
#include "node_pool.hpp"

namespace urt::detail::node_pool {
namespace {

// The shared depot: a stack of free node pointers, and every chunk ever
// allocated. Never destroyed: a runtime with static storage duration (a
// global, a function-local singleton) is made before the depot, which
// comes with the first spawn, so it is destroyed after it and still has
// tasks to drain (and workers giving nodes back) when the depot would go.
// Its memory stays reachable until the process ends.
// Magazines hold pointers, not linked nodes: taking a node never reads the
// node itself, whose cache lines were last written on another core.
class depot {
 public:
  static depot& instance() {
    static depot& d = *new depot;  // immortal (see above)
    return d;
  }
  // Fills out[0..n) with free nodes, n <= pool_batch; grows by one chunk
  // when empty, below pool_cap; 0 when empty at pool_cap. Throws
  // std::bad_alloc only while growing.
  std::size_t take(task_node** out) {
    std::lock_guard lock(mutex_);
    if (!has_free()) return 0;
    const std::size_t n = std::min(pool_batch, free_.size());
    std::copy(free_.end() - static_cast<std::ptrdiff_t>(n), free_.end(), out);
    free_.resize(free_.size() - n);
    return n;
  }
  // One free node, for a thread whose magazine is closed; grows as take(),
  // nullptr as take()'s 0.
  task_node* take_one() {
    std::lock_guard lock(mutex_);
    if (!has_free()) return nullptr;
    task_node* node = free_.back();
    free_.pop_back();
    return node;
  }
  // Takes back n nodes. Never allocates: free_ has room for every node.
  void give(task_node* const* in, std::size_t n) noexcept {
    std::lock_guard lock(mutex_);
    free_.insert(free_.end(), in, in + n);
  }
  depot_shape shape() noexcept {
    std::lock_guard lock(mutex_);
    return {chunks_.size(), chunks_.capacity(), free_.capacity(),
            heap_nodes.load(std::memory_order_relaxed)};
  }

  // Heap nodes made past pool_cap and not released yet (relaxed: a
  // statistic, read by shape()).
  std::atomic<std::size_t> heap_nodes{0};

 private:
  // Under the mutex: whether a free node is there, growing by one chunk
  // when none is and the pool is below pool_cap (may throw as grow()).
  bool has_free() {
    if (!free_.empty()) return true;
    if (chunks_.size() * pool_batch >= pool_cap) return false;
    grow();
    return true;
  }

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
// Trivially destructible, so that it stays usable for the whole life of
// the thread, also from the destructors of other thread_local objects: one
// made before the thread's first spawn is destroyed after the magazine's
// closer, and may spawn (a per-thread buffer flushed as a task). The closer
// gives the nodes back and closes the magazine; from then on the thread
// takes and gives single nodes straight from and to the depot, so nothing
// is left in it when the thread ends.
struct magazine {
  std::size_t count = 0;
  bool closed = false;
  task_node* slots[2 * pool_batch]{};
};
// Constant-initialized: no guard on the hot path (the closer has one).
constinit thread_local magazine tls_magazine;

struct magazine_closer {
  magazine_closer() = default;
  magazine_closer(const magazine_closer&) = delete;
  magazine_closer& operator=(const magazine_closer&) = delete;
  ~magazine_closer() {
    magazine& m = tls_magazine;
    depot::instance().give(m.slots, m.count);
    m.count = 0;
    m.closed = true;
  }
};

magazine& local() {
  thread_local magazine_closer closer;  // registered at the thread's first use
  (void)closer;
  return tls_magazine;
}

// Past pool_cap: a node of its own, given back to the heap by release().
task_node* heap_node() {
  auto* node = new task_node;
  node->pooled = false;
  depot::instance().heap_nodes.fetch_add(1, std::memory_order_relaxed);
  return node;
}

}  // namespace

URT_HOT task_node* allocate() {
  magazine& m = local();
  if (m.count == 0) {
    if (m.closed) {
      task_node* node = depot::instance().take_one();
      return node != nullptr ? node : heap_node();
    }
    m.count = depot::instance().take(m.slots);
    if (m.count == 0) return heap_node();
  }
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

URT_HOT void release(task_node* node) noexcept {
  if (!node->pooled) {
    depot::instance().heap_nodes.fetch_sub(1, std::memory_order_relaxed);
    delete node;
    return;
  }
  magazine& m = local();
  if (m.closed) {
    depot::instance().give(&node, 1);
    return;
  }
  if (m.count == 2 * pool_batch) {
    depot::instance().give(m.slots + pool_batch, pool_batch);
    m.count = pool_batch;
  }
  m.slots[m.count++] = node;
}

}  // namespace urt::detail::node_pool
