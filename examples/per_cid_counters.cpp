// per_cid_counters: per-ID counters that take memory for the workers that
// actually run a group at once, not for every worker of the runtime.
//
// A runtime of 256 workers (a synthetic topology: the same on any machine)
// runs a group's tasks on 4 of its workers; each task counts an event in
// urt::per_cid<std::uint64_t> without an atomic (its concurrency ID is its
// own while it runs). The program prints the per_cid's memory next to what
// a per-worker array of cache lines takes, and checks the total count.
// Exits 1 if a count is lost or the per_cid grew past what four workers
// running the group at once can need.
#include <cstdint>
#include <cstdio>

#include "urt/urt.hpp"

int main() {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("pack:2 l3:8 core:8 pu:2");  // 256 workers
  urt::runtime rt(o);
  const urt::group g = rt.make_group({.name = "ingest"});
  urt::per_cid<std::uint64_t> events(rt, g);

  constexpr unsigned tasks = 100'000;
  const urt::worker_set four{0, 64, 128, 192};  // 4 workers in different LLCs
  for (unsigned i = 0; i < tasks; ++i) {
    rt.spawn({.priority = 20, .affinity = four, .group = g}, [&] { ++events.local(); });
  }
  rt.stop();

  std::uint64_t total = 0;
  events.for_each([&](unsigned, const std::uint64_t& n) { total += n; });
  const std::size_t per_worker_bytes = rt.worker_count() * 64;  // one line per worker
  std::printf("workers: %zu, IDs used: %zu (at most 4 run the group at once)\n", rt.worker_count(),
              events.size());
  std::printf("per_cid: %zu bytes (%zu pointers + %zu lines); a per-worker array: %zu bytes\n",
              events.bytes(), events.capacity(), events.size(), per_worker_bytes);
  std::printf("events counted: %llu of %u\n", static_cast<unsigned long long>(total), tasks);
  const urt::group_stats s = rt.stats(g);
  std::printf("group %s: IDs allocated %llu, highest ID %d\n", s.name.c_str(),
              static_cast<unsigned long long>(s.cids_allocated), s.highest_cid);
  // Four IDs, unless a worker took a new one while a compaction step was
  // between taking a cached ID back and freeing its bit (DESIGN.md,
  // "Concurrency IDs": that ID is neither held nor free for a moment): each
  // of the four slots names at most one ID, and each of at most four
  // reclaimers has at most one in that state.
  return total == tasks && events.size() <= 2 * four.count() ? 0 : 1;
}
