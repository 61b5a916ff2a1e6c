#include "options.hpp"

#include <charconv>
#include <cstdint>
#include <string_view>

namespace kv {
namespace {

std::uint64_t number(std::string_view option, std::string_view text, std::uint64_t lo,
                     std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool whole = ec == std::errc{} && end == text.data() + text.size() && !text.empty();
  if (!whole || v < lo || v > hi) {
    throw usage_error(std::string(option) + ": \"" + std::string(text) + "\" is not an integer in " +
                      std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

}  // namespace

const char* usage_text() noexcept {
  return "usage: urt-kv [options]\n"
         "  a Redis-protocol key-value server on 127.0.0.1 (RESP2 and inline commands)\n"
         "  --port N               TCP port, 0..65535 (0: any free port; default 6380)\n"
         "  --mode urt|asio        urt: control and bulk commands as prioritized urt tasks\n"
         "                         asio: a plain asio::thread_pool server, the baseline (default urt)\n"
         "  --threads N            workers or pool threads, 1..1024 (default: one per CPU)\n"
         "  --control-priority P   urt task priority of PING ECHO GET SET DEL EXISTS DBSIZE INFO\n"
         "                         and the connections' I/O, 1..99 (default 80)\n"
         "  --bulk-priority P      urt task priority of KEYS and WORK, 0..99, below control (default 10)\n"
         "  --slice-us N           bulk work between two scheduling points, 1..1000 us (default 5)\n"
         "  --max-clients N        open connections at most, 1..1000000 (default 10000)\n"
         "  --max-request BYTES    size of one request at most, 64..536870912 (default 1048576)\n"
         "  --idle-timeout S       close a connection idle this long, 0 (never)..86400 (default 300)\n"
         "  --metrics-port N       also serve Prometheus metrics at http://127.0.0.1:N/metrics\n"
         "  --idle-spin-us N       urt mode: an idle worker spins at most N us before it parks,\n"
         "                         0..10000, adapted below it (default 500)\n"
         "  --bind pu|llc|workers  urt mode: each worker runs on its own CPU (pu), on the CPUs of\n"
         "                         its last-level cache (llc) or of all workers (default llc)\n"
         "  --help                 this text\n"
         "Prints \"listening on 127.0.0.1:<port>\" once it accepts; SIGINT or SIGTERM stop it.\n";
}

options parse_options(const std::vector<std::string>& args) {
  options o;
  bool control_set = false;
  bool bulk_set = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (!arg.starts_with("--")) throw usage_error("unexpected argument \"" + std::string(arg) + "\"");
    std::string_view name = arg;
    std::string_view value;
    bool inline_value = false;
    if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    static constexpr std::string_view known[] = {
        "--port", "--mode", "--threads", "--control-priority", "--bulk-priority", "--slice-us",
        "--max-clients", "--max-request", "--idle-timeout", "--metrics-port", "--idle-spin-us",
        "--bind"};
    bool is_known = false;
    for (std::string_view k : known) is_known = is_known || k == name;
    if (!is_known) throw usage_error("unknown option \"" + std::string(name) + "\" (see --help)");
    if (!inline_value) {
      if (i + 1 == args.size()) throw usage_error(std::string(name) + " needs a value");
      value = args[++i];
    }
    if (name == "--port") {
      o.port = static_cast<unsigned>(number(name, value, 0, 65535));
    } else if (name == "--mode") {
      if (value == "urt") {
        o.mode = server_mode::urt;
      } else if (value == "asio") {
        o.mode = server_mode::asio;
      } else {
        throw usage_error("--mode: \"" + std::string(value) + "\" is not urt or asio");
      }
    } else if (name == "--threads") {
      o.threads = static_cast<unsigned>(number(name, value, 1, 1024));
    } else if (name == "--control-priority") {
      o.control_priority = static_cast<int>(number(name, value, 1, 99));
      control_set = true;
    } else if (name == "--bulk-priority") {
      o.bulk_priority = static_cast<int>(number(name, value, 0, 99));
      bulk_set = true;
    } else if (name == "--slice-us") {
      o.slice = std::chrono::microseconds{number(name, value, 1, 1000)};
    } else if (name == "--max-clients") {
      o.max_clients = number(name, value, 1, 1'000'000);
    } else if (name == "--max-request") {
      o.max_request = number(name, value, 64, 512u << 20);
    } else if (name == "--idle-timeout") {
      o.idle_timeout = std::chrono::seconds{number(name, value, 0, 86400)};
    } else if (name == "--metrics-port") {
      o.metrics_port = static_cast<unsigned>(number(name, value, 0, 65535));
    } else if (name == "--idle-spin-us") {
      o.idle_spin = std::chrono::microseconds{number(name, value, 0, 10000)};
    } else if (name == "--bind") {
      if (value == "pu") {
        o.binding = urt::worker_binding::pu;
      } else if (value == "llc") {
        o.binding = urt::worker_binding::llc;
      } else if (value == "workers") {
        o.binding = urt::worker_binding::workers;
      } else {
        throw usage_error("--bind: \"" + std::string(value) + "\" is not pu, llc or workers");
      }
    }
  }
  if (o.bulk_priority >= o.control_priority) {
    throw usage_error("--bulk-priority " + std::to_string(o.bulk_priority) +
                      " must be below --control-priority " + std::to_string(o.control_priority) +
                      (control_set || bulk_set ? "" : " (defaults)"));
  }
  return o;
}

}  // namespace kv
