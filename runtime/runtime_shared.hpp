// runtime_shared: what a runtime shares with all its workers, and the
// start-up report. Read-mostly; set up by the runtime before any worker
// starts and constant afterwards, except the atomics below.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <latch>
#include <mutex>

#include "urt/options.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class cpupri;
class overload_mask;
class migrator;
class push_token;
class peer_bells;
class stranded_marks;
class stranded_peers;
class resched_requests;
class io_peers;
class bandwidth_table;
class cid_table;

/// Lifecycle of a runtime as the workers see it. Transitions only forward:
/// running -> draining | cancelling -> stopped.
enum class run_state : std::uint8_t { running, draining, cancelling, stopped };

struct runtime_shared {
  /// Written by stop() (seq_cst store, then every doorbell is rung);
  /// workers load it with acquire at each scheduling point.
  std::atomic<run_state> state{run_state::running};
  /// Bumped (and notified) by a worker going idle while the runtime is not
  /// running; stop() waits on it between checks for quiescence.
  std::atomic<std::uint64_t> idle_epoch{0};
  /// Set once by the default exception handler.
  std::atomic<bool> exception_reported{false};

  const runtime_options* options = nullptr;  // validated; the parts take their config from it
  const topology* topo = nullptr;
  cpupri* prio_map = nullptr;  // a worker's level is set under its queue lock
  overload_mask* overload = nullptr;
  migrator* migrate = nullptr;
  push_token* token = nullptr;
  peer_bells* bells = nullptr;  // whom a push or a token hop rings, by worker id
  stranded_marks* strand = nullptr;  // workers with remote spawns while busy (stranded.hpp)
  stranded_peers* strand_peers = nullptr;  // takes a stuck worker's inbox in, by worker id
  resched_requests* resched = nullptr;  // urgent spawns behind running tasks (resched.hpp)
  io_peers* reactors = nullptr;            // polls a stuck worker's reactor, by worker id
  bandwidth_table* bandwidth_params = nullptr;  // live bandwidth parameters (QSBR)
  cid_table* cids = nullptr;  // each group's concurrency-ID space (cid.hpp)
  const void* owner = nullptr;  // identifies the runtime for worker::current_in()
};

/// Collects worker start-up results for the runtime constructor.
struct startup {
  explicit startup(std::ptrdiff_t workers) : done(workers) {}
  std::latch done;
  std::mutex mutex;
  std::exception_ptr error;  // the first failure
};

}  // namespace urt::detail
