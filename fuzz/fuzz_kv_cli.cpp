// libFuzzer target: urt-kv's command line (examples/kv_server/options.cpp).
// The input is split at NUL bytes into arguments (argv[1..]).
// Checks: a rejection is a kv::usage_error with a one-line message (any
// other exception escapes and is a crash); an accepted command line has
// every value inside the range --help documents, and the bulk priority is
// below the control priority.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"
#include "options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::vector<std::string>& args) {
  urt_fuzz::fail("fuzz_kv_cli", what, args);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = urt_fuzz::split_args(data, size);
  if (args.size() > 64) return 0;  // a command line, not a corpus of them

  kv::options o;
  try {
    o = kv::parse_options(args);
  } catch (const kv::usage_error& e) {
    const std::string_view message = e.what();
    if (message.empty()) fail("an empty message", args);
    // One line, unless it quotes a value that has a newline in it.
    bool quoted_newline = false;
    for (const auto& a : args) quoted_newline = quoted_newline || a.find('\n') != std::string::npos;
    if (!quoted_newline && message.find('\n') != std::string_view::npos) {
      fail("a message over several lines", args);
    }
    return 0;
  }
  if (o.help) return 0;
  if (o.port > 65535) fail("--port out of range", args);
  if (o.threads > 1024) fail("--threads out of range", args);  // 0: one per CPU
  if (o.control_priority < 1 || o.control_priority > 99) fail("--control-priority out of range", args);
  if (o.bulk_priority < 0 || o.bulk_priority >= o.control_priority) {
    fail("--bulk-priority not below --control-priority", args);
  }
  if (o.slice.count() < 1 || o.slice.count() > 1000) fail("--slice-us out of range", args);
  if (o.max_clients < 1 || o.max_clients > 1'000'000) fail("--max-clients out of range", args);
  if (o.max_request < 64 || o.max_request > (512u << 20)) fail("--max-request out of range", args);
  if (o.idle_timeout.count() < 0 || o.idle_timeout.count() > 86400) fail("--idle-timeout out of range", args);
  if (o.metrics_port && *o.metrics_port > 65535) fail("--metrics-port out of range", args);
  if (o.idle_spin.count() < 0 || o.idle_spin.count() > 10000) fail("--idle-spin-us out of range", args);
  if (o.binding != urt::worker_binding::pu && o.binding != urt::worker_binding::llc &&
      o.binding != urt::worker_binding::workers) {
    fail("--bind not a binding", args);
  }
  return 0;
}
