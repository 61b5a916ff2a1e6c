// options: urt-kv's command line.
//
//   urt-kv [--port N] [--mode urt|asio] [--threads N]
//          [--control-priority P] [--bulk-priority P] [--slice-us N]
//          [--max-clients N] [--max-request BYTES] [--idle-timeout SECONDS]
//          [--metrics-port N] [--idle-spin-us N] [--bind pu|llc|workers]
//
// Every option also takes --name=value. A bad value is an error naming
// the option and the value (parse_options throws usage_error; exit 2).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "urt/topology.hpp"

namespace kv {

enum class server_mode { urt, asio };

struct options {
  unsigned port = 6380;                       ///< 0: the system picks one
  server_mode mode = server_mode::urt;
  unsigned threads = 0;                       ///< 0: one per CPU this process may use
  int control_priority = 80;                  ///< urt mode: PING, GET, SET, ...
  int bulk_priority = 10;                     ///< urt mode: KEYS, WORK
  std::chrono::microseconds slice{5};         ///< bulk work between scheduling points
  std::size_t max_clients = 10000;            ///< Redis's default maxclients
  std::size_t max_request = 1 << 20;          ///< bytes of one request
  std::chrono::seconds idle_timeout{300};     ///< 0: never
  std::optional<unsigned> metrics_port;       ///< HTTP /metrics (Prometheus)
  /// urt mode: runtime_options::idle_spin, the longest an idle worker
  /// spins before it parks (adapted below it: idle_window.hpp). 500 us, 10x
  /// the runtime's default: a worker parked in its reactor cannot be
  /// rescued, and one that the OS wakes while a client holds its CPU waits
  /// for the client's time slice; a spinning one is rescued after 110 us
  /// (bench/README.md, "the reactor rescue"). On a CPU of its own it also
  /// served more requests/s than 50 us (bench/README.md, "worker
  /// binding"). The window shrinks to 0 when requests come further apart
  /// than this, so an idle server does not spin.
  std::chrono::microseconds idle_spin{500};
  /// urt mode: runtime_options::binding. llc, not the runtime's pu: a
  /// server shares its CPUs with its clients and the kernel's network
  /// stack, and a worker bound to one CPU that a client keeps busy holds
  /// its connections' work until it gets a turn, while one bound to its
  /// LLC is moved by the OS to a free CPU (bench/README.md, "worker
  /// binding").
  urt::worker_binding binding = urt::worker_binding::llc;
  bool help = false;
};

struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// The options of argv[1..]; throws usage_error.
[[nodiscard]] options parse_options(const std::vector<std::string>& args);

[[nodiscard]] const char* usage_text() noexcept;

}  // namespace kv
