// commands: what urt-kv does with a parsed request. Control commands run
// at once (run_control); the bulk ones (KEYS, WORK) are checked here and
// run by the server in slices, with scheduling points between them (see
// main.cpp), so the helpers they are made of live here too.
//
//   control: PING [msg], ECHO msg, GET k, SET k v, DEL k..., EXISTS k...,
//            DBSIZE, INFO [section], SELECT 0, QUIT, CONFIG GET p, COMMAND
//   bulk:    KEYS pattern, WORK microseconds (0..1000000)
//
// Every call comes from a QSBR reader (store.hpp): a urt task, or a thread
// of the plain Asio server between its online() and offline().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "metrics.hpp"
#include "store.hpp"

namespace kv {

/// What the bulk path must do for a request.
enum class bulk_kind { none, keys, work };

struct command_plan {
  command_class cls = command_class::control;
  bulk_kind bulk = bulk_kind::none;
  std::string_view pattern;            ///< KEYS
  std::chrono::nanoseconds work{0};    ///< WORK
};

/// The longest WORK request: a second.
inline constexpr std::int64_t max_work_us = 1'000'000;

/// Where commands act, and how INFO sees the server.
struct command_context {
  store& db;
  server_counters& counters;
  std::function<metrics_view()> view;  ///< for INFO
};

/// Looks at a request. A bulk command with bad arguments is planned as
/// control: run_control replies its error at once.
[[nodiscard]] command_plan plan(std::span<const std::string_view> args) noexcept;

/// Runs a control command (or replies the error of a malformed bulk one,
/// or of an unknown command) and appends the reply to `out`. Returns false
/// when the connection must close once the reply is written (QUIT).
bool run_control(std::span<const std::string_view> args, std::string& out, command_context& ctx);

/// Busy-works until this thread has run for `d` (WORK's unit of load): wall
/// time, except that a gap of more than 5 us between two reads of the
/// clock (the thread was preempted) counts as 5 us. The thread's own CPU
/// clock would cost a system call per read.
void spin_for(std::chrono::nanoseconds d) noexcept;

}  // namespace kv
