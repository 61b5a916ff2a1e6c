#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define URT_NODE_POOL_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define URT_NODE_POOL_LSAN 1
#endif
#endif
#ifndef URT_NODE_POOL_LSAN
#define URT_NODE_POOL_LSAN 0
#endif
#if URT_NODE_POOL_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "hot.hpp"
#include "node_pool.hpp"

namespace urt::detail::node_pool {
namespace {

// The shared depot: every node the pool has made, in one address range,
// and a bitmap of the free ones. Never destroyed: a runtime with static
// storage duration (a global, a function-local singleton) is made before
// the depot, which comes with the first spawn, so it is destroyed after it
// and still has tasks to drain (and workers giving nodes back) when the
// depot would go. Its memory stays mapped until the process ends.
//
// Why a bitmap, lowest address first: a node is handed out by one thread,
// run and released by another, and magazines trade them in batches, so a
// free list (a stack of pointers) mixed the nodes of every chunk after a
// few bursts. A spawn flood then wrote and a worker read nodes scattered
// over the pool's 40 MiB: each node a cache and TLB miss of its own. In a
// process that posted a million tasks a run, the throughput fell run after
// run, from 12-13 to 4.5-6.7 M tasks/s, and sorting the free list between
// runs kept it at 12-14 (bench/README.md, "urt-peers (f): the node pool's
// order"). Handing out the lowest free nodes, in address order, keeps the
// nodes in use packed at the start of the range and each batch on
// consecutive lines, whatever order they came back in.
//
// Magazines hold pointers, not linked nodes: taking a node never reads the
// node itself, whose cache lines were last written on another core.
class depot {
 public:
  static depot& instance() {
    static depot& d = *new depot;  // immortal (see above)
    return d;
  }
  // Fills out[0..n) with free nodes, n <= pool_batch, the lowest free
  // addresses in descending order (a magazine hands out its last slot
  // first, so they are used in ascending order); grows by one chunk when
  // none is free, below pool_cap; 0 when none is free at pool_cap. Throws
  // std::bad_alloc only while growing.
  std::size_t take(task_node** out) {
    std::lock_guard lock(mutex_);
    if (!has_free()) return 0;
    task_node* taken[pool_batch];
    std::size_t n = 0;
    while (n < pool_batch && free_count_ > 0) {
      const std::size_t w = lowest_word();
      std::uint64_t bits = free_[w];
      while (bits != 0 && n < pool_batch) {
        const auto bit = static_cast<std::size_t>(std::countr_zero(bits));
        bits &= bits - 1;
        taken[n++] = &nodes_[w * pool_batch + bit];
      }
      mark_taken(w, free_[w] & ~bits);
    }
    std::reverse_copy(taken, taken + n, out);
    return n;
  }
  // One free node, the lowest, for a thread whose magazine is closed;
  // grows as take(), nullptr as take()'s 0.
  task_node* take_one() {
    std::lock_guard lock(mutex_);
    if (!has_free()) return nullptr;
    const std::size_t w = lowest_word();
    const std::uint64_t bit = free_[w] & -free_[w];
    mark_taken(w, bit);
    return &nodes_[w * pool_batch + static_cast<std::size_t>(std::countr_zero(bit))];
  }
  // Takes back n pooled nodes. Never allocates.
  void give(task_node* const* in, std::size_t n) noexcept {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < n; ++i) {
      const auto index = static_cast<std::size_t>(in[i] - nodes_);
      const std::size_t w = index / pool_batch;
      free_[w] |= std::uint64_t{1} << (index % pool_batch);
      nonempty_[w / 64] |= std::uint64_t{1} << (w % 64);
    }
    free_count_ += n;
  }
  depot_shape shape() noexcept {
    std::lock_guard lock(mutex_);
    return {chunks_, free_count_, heap_nodes.load(std::memory_order_relaxed)};
  }

  // Heap nodes made past pool_cap and not released yet (relaxed: a
  // statistic, read by shape()).
  std::atomic<std::size_t> heap_nodes{0};

 private:
  static_assert(pool_batch == 64, "a chunk is one word of the free bitmap");
  static constexpr std::size_t max_chunks = pool_cap / pool_batch;
  static constexpr std::size_t range_bytes = pool_cap * sizeof(task_node);

  // Under the mutex: whether a free node is there, growing by one chunk
  // when none is and the pool is below pool_cap (may throw as grow()).
  bool has_free() {
    if (free_count_ > 0) return true;
    if (chunks_ == max_chunks) return false;
    grow();
    return true;
  }

  // Under the mutex, free_count_ > 0: the lowest word of free_ with a bit set.
  [[nodiscard]] std::size_t lowest_word() const noexcept {
    std::size_t s = 0;
    while (nonempty_[s] == 0) ++s;
    return s * 64 + static_cast<std::size_t>(std::countr_zero(nonempty_[s]));
  }
  // Under the mutex: the nodes of `bits` in word w are taken.
  void mark_taken(std::size_t w, std::uint64_t bits) noexcept {
    free_[w] &= ~bits;
    if (free_[w] == 0) nonempty_[w / 64] &= ~(std::uint64_t{1} << (w % 64));
    free_count_ -= static_cast<std::size_t>(std::popcount(bits));
  }

  // The range is reserved whole (PROT_NONE, no memory) at the first grow;
  // each grow makes the next chunk's pages readable and writable (the
  // commit, which fails as an allocation would) and constructs its nodes.
  // (Transparent huge pages for the range, committed 2 MiB at a time, made
  // no difference measured: bench/README.md.)
  void grow() {
    if (nodes_ == nullptr) {
      void* p = mmap(nullptr, range_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      nodes_ = static_cast<task_node*>(p);
#if URT_NODE_POOL_LSAN
      // Nodes hold callables, which may own heap memory: a root for the
      // leak checker, as the heap chunks before it were reachable.
      __lsan_register_root_region(nodes_, range_bytes);
#endif
    }
    const std::size_t first = chunks_ * pool_batch;
    // Whole pages, [the page of the chunk's first byte, the page after its
    // last); a page shared with the chunk before keeps its contents.
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto from = reinterpret_cast<std::uintptr_t>(nodes_ + first) & ~(page - 1);
    const auto to =
        (reinterpret_cast<std::uintptr_t>(nodes_ + first + pool_batch) + page - 1) & ~(page - 1);
    if (mprotect(reinterpret_cast<void*>(from), to - from, PROT_READ | PROT_WRITE) != 0) {
      throw std::bad_alloc();
    }
    for (std::size_t i = 0; i < pool_batch; ++i) new (nodes_ + first + i) task_node;
    free_[chunks_] = ~std::uint64_t{0};
    nonempty_[chunks_ / 64] |= std::uint64_t{1} << (chunks_ % 64);
    free_count_ += pool_batch;
    ++chunks_;
  }

  std::mutex mutex_;
  task_node* nodes_ = nullptr;  // the range; chunks_ * pool_batch nodes made
  std::size_t chunks_ = 0;
  std::size_t free_count_ = 0;
  // Bit b of free_[w]: node w * pool_batch + b is free (made and in the
  // depot). Bit b of nonempty_[s]: free_[s * 64 + b] != 0.
  std::uint64_t free_[max_chunks] = {};
  std::uint64_t nonempty_[(max_chunks + 63) / 64] = {};
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
