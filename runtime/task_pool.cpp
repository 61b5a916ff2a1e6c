#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "task_node.hpp"

namespace urt::detail::node_pool {
namespace {

struct chain {
  task_node* head = nullptr;
  std::size_t count = 0;

  void push(task_node* n) noexcept {
    n->pool_next = head;
    head = n;
    ++count;
  }
  task_node* pop() noexcept {
    task_node* n = head;
    head = n->pool_next;
    --count;
    return n;
  }
  // Splits off the first `n` nodes (n <= count).
  chain take(std::size_t n) noexcept {
    chain out;
    while (out.count < n) out.push(pop());
    return out;
  }
};

// The shared depot: full chains of pool_batch nodes, and every chunk ever
// allocated (freed at process exit, so a leaked runtime leaks nothing).
class depot {
 public:
  static depot& instance() {
    static depot d;
    return d;
  }
  chain take() {
    std::lock_guard lock(mutex_);
    if (!full_.empty()) {
      chain c = full_.back();
      full_.pop_back();
      return c;
    }
    if (partial_.count > 0) {
      chain c = partial_;
      partial_ = chain{};
      return c;
    }
    auto block = std::make_unique<task_node[]>(pool_batch);
    chain c;
    for (std::size_t i = 0; i < pool_batch; ++i) c.push(&block[i]);
    chunks_.push_back(std::move(block));
    full_.reserve(chunks_.size());  // give() below never allocates
    return c;
  }
  // Takes back a chain of at most pool_batch nodes. Short chains (from an
  // exiting thread) are merged first, so every chain in full_ is exactly
  // pool_batch long, there are never more of them than chunks, and the
  // push_back never allocates.
  void give(chain c) noexcept {
    std::lock_guard lock(mutex_);
    if (c.count < pool_batch) {
      while (c.count > 0) partial_.push(c.pop());
      if (partial_.count < pool_batch) return;
      c = partial_.take(pool_batch);
    }
    full_.push_back(c);
  }

 private:
  std::mutex mutex_;
  std::vector<chain> full_;
  chain partial_;
  std::vector<std::unique_ptr<task_node[]>> chunks_;
};

// The calling thread's magazine. Holds at most 2 * pool_batch nodes.
struct magazine {
  chain nodes;
  depot& home = depot::instance();  // constructed first, so destroyed after us
  ~magazine() {
    while (nodes.count > 0) home.give(nodes.take(std::min(nodes.count, pool_batch)));
  }
};

magazine& local() {
  thread_local magazine m;
  return m;
}

}  // namespace

task_node* allocate() {
  magazine& m = local();
  if (m.nodes.count == 0) m.nodes = m.home.take();
  task_node* n = m.nodes.pop();
  n->rq = rq_link{};
  n->pool_next = nullptr;
  return n;
}

void release(task_node* node) noexcept {
  magazine& m = local();
  m.nodes.push(node);
  if (m.nodes.count >= 2 * pool_batch) m.home.give(m.nodes.take(pool_batch));
}

}  // namespace urt::detail::node_pool
