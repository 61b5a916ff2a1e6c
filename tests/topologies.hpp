// The synthetic hwloc topologies the tests run on, and the helpers the test
// files share. A synthetic topology binds no thread to a real CPU, so a
// runtime on any of these shapes behaves the same on any machine.
//
// hwloc synthetic strings: "pack:2 [numa] l3:8 core:8 pu:2" is 2 packages,
// each with a NUMA node, 8 L3 caches each, 8 cores each, 2 PUs each. Without
// a cache level the package (or the machine) is the LLC domain; without
// "[numa]" hwloc adds one NUMA node for the machine. Every PU is a worker.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <latch>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "urt/runtime.hpp"
#include "urt/topology.hpp"
#include "urt/worker_set.hpp"

namespace urt_test {

/// A named synthetic topology and the counts it promises (topology_test checks them).
struct shape {
  std::string_view name;       ///< what CAPTURE and failure messages show
  std::string_view synthetic;  ///< the hwloc synthetic description
  unsigned workers;            ///< PUs, one worker each
  unsigned llcs;               ///< last-level caches
  unsigned numa_nodes;         ///< NUMA nodes
};

/// Lets CAPTURE(shape) print its name and description.
inline std::ostream& operator<<(std::ostream& os, const shape& s) {
  return os << s.name << " \"" << s.synthetic << '"';
}

// The named shapes.

/// Flat: 4 cores, one LLC, one NUMA node.
inline constexpr shape flat{"flat", "core:4 pu:1", 4, 1, 1};
/// Several LLCs: 2 L3 caches of 4 cores, one NUMA node.
inline constexpr shape several_llcs{"several LLCs", "l3:2 core:4 pu:1", 8, 2, 1};
/// Two NUMA nodes: 2 packages with a node each, 2 L3 of 2 cores per package.
inline constexpr shape two_numa{"two NUMA nodes", "pack:2 [numa] l3:2 core:2 pu:1", 8, 4, 2};
/// SMT: 2 cores of 2 hardware threads each, one LLC.
inline constexpr shape smt{"SMT", "core:2 pu:2", 4, 1, 1};
/// 16 workers: 2 NUMA nodes, 4 L3 of 4 cores (the largest shape of most live tests).
inline constexpr shape numa_16{"16 workers", "pack:2 [numa] l3:2 core:4 pu:1", 16, 4, 2};
/// 32 workers: SMT pairs in 4 L3 caches on 2 packages, one NUMA node.
inline constexpr shape smt_llcs{"SMT in several LLCs", "pack:2 l3:2 core:4 pu:2", 32, 4, 1};
/// 64 workers: 2 NUMA nodes, 8 L3 of 4 SMT cores (a few live tests).
inline constexpr shape workers_64{"64 workers", "pack:2 [numa] l3:4 core:4 pu:2", 64, 8, 2};
/// 60 workers in sizes that are no power of two: 4 NUMA nodes, 12 L3 of 5 cores.
inline constexpr shape uneven{"uneven", "pack:4 [numa] l3:3 core:5 pu:1", 60, 12, 4};
/// 150 workers in 3 LLCs of 50, which do not end on a 64-bit word.
inline constexpr shape wide_odd_llcs{"LLCs of 50", "l3:3 core:50 pu:1", 150, 3, 1};
/// 256 workers in 2 LLCs of 128 (LLCs wider than one 64-bit word), 2 NUMA nodes.
inline constexpr shape wide_llcs{"LLCs of 128", "pack:2 [numa] l3:1 core:64 pu:2", 256, 2, 2};
/// 256 workers: 2 NUMA nodes, 16 L3 of 8 SMT cores.
inline constexpr shape workers_256{"256 workers", "pack:2 [numa] l3:8 core:8 pu:2", 256, 16, 2};
/// 1024 workers (urt::max_workers): 4 NUMA nodes, 32 L3 of 16 SMT cores.
inline constexpr shape workers_1024{"1024 workers", "pack:4 [numa] l3:8 core:16 pu:2", 1024, 32, 4};
static_assert(workers_1024.workers <= urt::max_workers, "1024 workers must be allowed");

/// Flat shapes of 1 to 8 workers ("core:n pu:1"), for tests about worker counts, not shape.
inline constexpr std::array<shape, 8> flat_shapes{{
    {"flat 1", "core:1 pu:1", 1, 1, 1},
    {"flat 2", "core:2 pu:1", 2, 1, 1},
    {"flat 3", "core:3 pu:1", 3, 1, 1},
    {"flat 4", "core:4 pu:1", 4, 1, 1},
    {"flat 5", "core:5 pu:1", 5, 1, 1},
    {"flat 6", "core:6 pu:1", 6, 1, 1},
    {"flat 7", "core:7 pu:1", 7, 1, 1},
    {"flat 8", "core:8 pu:1", 8, 1, 1},
}};

/// The flat shape of `n` workers, 1 <= n <= 8.
constexpr const shape& flat_n(unsigned n) { return flat_shapes.at(n - 1); }

/// The shapes live runtimes are run over: 4 to 16 workers, 1 or several LLCs and NUMA nodes.
inline constexpr std::array<shape, 5> live_shapes{flat, several_llcs, two_numa, smt, numa_16};

/// A spread of shapes up to 1024 workers for single-threaded mechanism tests (cpupri's shards).
inline constexpr std::array<shape, 8> mechanism_shapes{
    flat, several_llcs, two_numa, smt, smt_llcs, uneven, workers_256, workers_1024};

/// Every named shape (topology_test checks each one's counts).
inline constexpr std::array<shape, 12> all_named_shapes{
    flat,       several_llcs, two_numa,      smt,       numa_16,     smt_llcs,
    workers_64, uneven,       wide_odd_llcs, wide_llcs, workers_256, workers_1024};

// Helpers.

/// The topology source of a shape.
inline urt::topology_source source_of(const shape& s) {
  return urt::topology_source::synthetic(std::string(s.synthetic));
}

/// The worker placements of a shape, as urt::topology computes them.
inline std::vector<urt::worker_place> places(const shape& s) {
  const urt::topology t(urt::topology_options{.source = source_of(s)});
  return {t.workers().begin(), t.workers().end()};
}

/// The workers of a shape's LLC `llc`.
inline urt::worker_set workers_in_llc(const shape& s, unsigned llc) {
  urt::worker_set set;
  for (const auto& p : places(s)) {
    if (p.llc == llc) set.add(p.worker);
  }
  return set;
}

/// The workers of a shape's NUMA node `numa`.
inline urt::worker_set workers_in_numa(const shape& s, unsigned numa) {
  urt::worker_set set;
  for (const auto& p : places(s)) {
    if (p.numa == numa) set.add(p.worker);
  }
  return set;
}

/// A runtime on a synthetic shape (no real binding) with a short idle spin.
inline urt::runtime_options synthetic_workers(const shape& s) {
  urt::runtime_options o;
  o.topology = source_of(s);
  o.idle_spin = std::chrono::microseconds{5};
  return o;
}

/// A runtime of `n` flat workers (1 <= n <= 8), for tests where only the count matters.
inline urt::runtime_options synthetic_workers(unsigned n) { return synthetic_workers(flat_n(n)); }

/// Busy for `d` on the calling thread (a task's CPU-bound work).
inline void spin_for(std::chrono::nanoseconds d) {
  const auto until = urt::clock::now() + d;
  while (urt::clock::now() < until) {
  }
}

/// The what() of the exception `fn` throws, or "<no exception>".
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

/// A one-shot gate: a thread (a task or the test) waits until another opens it.
class gate {
 public:
  void open() {
    open_.store(true);
    open_.notify_all();
  }
  void wait() const { open_.wait(false); }

 private:
  std::atomic<bool> open_{false};
};

/// Counts up; a thread waits until it reaches a value.
class counter {
 public:
  void add() {
    n_.fetch_add(1);
    n_.notify_all();
  }
  void wait_for(int want) const {
    for (int seen = n_.load(); seen < want; seen = n_.load()) n_.wait(seen);
  }
  [[nodiscard]] int value() const { return n_.load(); }

 private:
  std::atomic<int> n_{0};
};

/// Holds worker 0 in one task at `p` until open(): the task spins on a flag
/// and takes no scheduling point, so what is spawned meanwhile waits in
/// worker 0's inbox or run queue.
class worker_0_hold {
 public:
  void occupy(urt::runtime& rt, urt::priority_t p = 99) {
    rt.spawn({.priority = p, .affinity = urt::worker_set{0}}, [this] {
      started_.count_down();
      while (!open_.load()) std::this_thread::yield();
    });
    started_.wait();
  }
  void open() { open_.store(true); }

 private:
  std::atomic<bool> open_{false};
  std::latch started_{1};
};

}  // namespace urt_test
