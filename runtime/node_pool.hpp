// node_pool: where task nodes come from and go back to.
#pragma once

#include <cstddef>

#include "task_node.hpp"

namespace urt::detail {

/// Process-wide pool of task nodes: a per-thread magazine of node pointers
/// in front of a shared depot (Bonwick's magazine allocator). Any thread
/// may allocate and free, including a thread other than the allocating one.
/// Steady state touches only the calling thread's magazine; moving a batch
/// to or from the depot takes one mutex per `pool_batch` nodes. The depot
/// hands out its lowest-addressed free nodes first, in address order
/// (node_pool.cpp says why). The pool's nodes lie in one address range,
/// reserved at the first allocation and committed a chunk at a time as
/// the pool grows; the heap is used only past pool_cap (below). A thread's
/// nodes go back to the depot when it exits (a spawn from a later
/// thread_local destructor then takes its node from the depot); the depot
/// is never destroyed, so runtimes of static storage duration may still
/// spawn and drain during exit.
namespace node_pool {
/// Nodes moved between a thread and the depot at once.
inline constexpr std::size_t pool_batch = 64;
/// The most nodes the pool makes (2^17: 40 MiB of 320-byte nodes). The
/// pool keeps every node it has made until the process exits, so it stops
/// growing here: past it, a node that the magazine and the depot cannot
/// give is one heap allocation of its own (task_node::pooled false), freed
/// by its release. A burst of a million queued tasks so costs an
/// allocation per task beyond this many, and leaves at most this many
/// nodes behind, not a million (over 300 MiB). Every benchmark batch (2^16
/// tasks) fits below it.
inline constexpr std::size_t pool_cap = std::size_t{1} << 17;
static_assert(pool_cap % pool_batch == 0);
/// A free node: its payload consumed, its hooks unlinked (as the run queue
/// and inbox leave them). Throws std::bad_alloc when growing fails, or past
/// pool_cap when the heap has no room for one node.
task_node* allocate();
/// Returns a node whose payload has been consumed: a pooled one to the
/// calling thread's magazine, a heap one to the heap.
void release(task_node* node) noexcept;

/// The depot's bookkeeping, for tests: chunks of pool_batch nodes made so
/// far (at most pool_cap / pool_batch), the nodes free in the depot (not
/// counting those in magazines), and the heap nodes made past pool_cap and
/// not released yet.
struct depot_shape {
  std::size_t chunks = 0;
  std::size_t free_nodes = 0;
  std::size_t heap_nodes = 0;
};
/// Takes the depot's mutex.
depot_shape shape() noexcept;
}  // namespace node_pool

}  // namespace urt::detail
