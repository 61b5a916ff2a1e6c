// runtime::impl: what one urt::runtime owns (the shared mechanisms, the
// workers, the stop state), shared by the translation units that
// implement urt::runtime: runtime.cpp (start, stop, stats),
// runtime_spawn.cpp (spawns, executors) and runtime_groups.cpp (groups,
// budgets, concurrency IDs). DESIGN.md, "The pieces", has the map.
#pragma once

// urt/executor.hpp (Asio, then urt/runtime.hpp) before any standard header:
// <asio/detail/config.hpp> picks asio::aligned_new's allocator by whether a
// libstdc++ header came first, and every urt translation unit includes Asio
// first, so the library holds one definition of it (DESIGN.md, Asio's traps).
#include "urt/executor.hpp"
#include "urt/runtime.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "bandwidth_table.hpp"
#include "cid.hpp"
#include "function_ref.hpp"
#include "migrator.hpp"
#include "placement.hpp"
#include "resched.hpp"
#include "worker.hpp"

namespace urt {
namespace detail {

// The balancers' way to ring other workers: their doorbells, by id.
class worker_bells final : public detail::peer_bells {
 public:
  explicit worker_bells(const std::vector<std::unique_ptr<worker>>& workers) : workers_(workers) {}
  bool ring(unsigned w) noexcept override { return workers_[w]->ring(); }
  bool hand_token(unsigned w, std::uint64_t seq) noexcept override {
    return workers_[w]->hand_token(seq);
  }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

// The idle workers' way to take a stuck worker's inbox in (stranded.hpp).
class worker_inboxes final : public detail::stranded_peers {
 public:
  explicit worker_inboxes(const std::vector<std::unique_ptr<worker>>& workers)
      : workers_(workers) {}
  std::size_t take_in(unsigned w, int above) noexcept override {
    return workers_[w]->take_in_for_peer(above);
  }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

// The idle workers' way to poll a stuck worker's reactor (io_rescue.hpp).
class worker_reactors final : public detail::io_peers {
 public:
  explicit worker_reactors(const std::vector<std::unique_ptr<worker>>& workers)
      : workers_(workers) {}
  unsigned worker_count() const noexcept override {
    return static_cast<unsigned>(workers_.size());
  }
  state look(unsigned w) const noexcept override { return workers_[w]->io_state(); }
  std::size_t rescue(unsigned w) override { return workers_[w]->rescue_io(); }

 private:
  const std::vector<std::unique_ptr<worker>>& workers_;
};

}  // namespace detail

struct runtime::impl {
  explicit impl(runtime_options opts);
  ~impl();

  void note_change() noexcept;
  void ring_all() noexcept;
  // Publishes a budget change (set_bandwidth) and rings every worker.
  void change_bandwidth(detail::function_ref<void(detail::bandwidth_table::block&)> change);
  void wait_quiescent() noexcept;
  void shut_down(detail::run_state via) noexcept;

  runtime_options options;
  urt::topology topo;
  std::unique_ptr<detail::cpupri> prio_map;
  std::unique_ptr<detail::overload_mask> overload;
  detail::push_token token;
  // Outlives the workers, which read it until they exit.
  std::unique_ptr<detail::bandwidth_table> bandwidth_params;
  std::unique_ptr<detail::cid_table> cids;  // outlives the workers too
  std::unique_ptr<detail::stranded_marks> strand;  // outlives the workers too
  std::unique_ptr<detail::resched_requests> resched;  // outlives the workers too
  detail::runtime_shared shared;
  std::vector<std::unique_ptr<detail::worker>> workers;
  detail::worker_bells bells{workers};
  detail::worker_inboxes strand_peers{workers};
  detail::worker_reactors reactors{workers};
  // By worker id, for the migrator: sized before the workers exist (the
  // migrator keeps a span over it), filled in as they are made.
  std::vector<detail::rt_queue*> queues;
  std::unique_ptr<detail::migrator> migrate;
  std::unique_ptr<detail::placement> place;
  std::mutex stop_mutex;
  bool stopped = false;  // guarded by stop_mutex
  // Groups made so far (the default one included): spawners check a
  // task's group against it. Written under the table's writer mutex;
  // release: pairs with the acquire load in check_group().
  std::atomic<unsigned> groups{1};

  // Throws unless `g` is a group of this runtime.
  // (`suffix` is appended to `what` in the message: the field's name.)
  void check_group(const group& g, const char* what, const char* suffix = "") const;
  // Throws std::invalid_argument naming `what`.field for a bad spec.
  void check_spec(const task_spec& spec, const char* what) const;
  // The kept copy of an executor affinity (runtime::executor).
  const worker_set* intern(const worker_set& set);
  std::mutex affinities_mutex;
  std::deque<worker_set> affinities;  // guarded by affinities_mutex; never shrinks
};

}  // namespace urt
