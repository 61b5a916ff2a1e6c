#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <string_view>

namespace loadgen {
namespace {

// The most seconds one point is measured for, in one round (--duration) or
// over all its rounds (--rounds x --duration): its samples are kept until
// the end.
constexpr double max_point_s = 3600;

[[noreturn]] void bad(std::string_view flag, std::string_view value, std::string_view why) {
  throw usage_error(std::string(flag) + ": \"" + std::string(value) + "\" " + std::string(why));
}

std::uint64_t integer(std::string_view flag, std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi) {
    bad(flag, text, "is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

double real(std::string_view flag, std::string_view text, double lo, double hi, bool lo_open) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool ok = !text.empty() && ec == std::errc{} && end == text.data() + text.size() &&
                  std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (!ok) {
    char range[96];
    std::snprintf(range, sizeof range, "is not a number in %s%g..%g%s", lo_open ? "(" : "", lo, hi,
                  lo_open ? "]" : "");
    bad(flag, text, range);
  }
  return v;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(sep, start);
    parts.emplace_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

std::vector<std::string> split_blanks(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 32 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
         });
}

}  // namespace

std::vector<int> parse_cpulist(const std::string& flag, const std::string& text) {
  std::set<int> cpus;
  for (const std::string& part : split(text, ',')) {
    const std::size_t dash = part.find('-');
    const std::string_view first = std::string_view(part).substr(0, dash);
    const auto lo = static_cast<int>(integer(flag, first, 0, 4095));
    int hi = lo;
    if (dash != std::string::npos) hi = static_cast<int>(integer(flag, std::string_view(part).substr(dash + 1), 0, 4095));
    if (hi < lo) bad(flag, text, "is not a cpulist: a range runs backwards");
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return {cpus.begin(), cpus.end()};
}

const char* usage_text() noexcept {
  return "usage: urt-loadgen --server PATH/urt-kv [options]\n"
         "       urt-loadgen --target NAME=HOST:PORT [--target ...] [options]\n"
         "  an open-loop load generator for urt-kv: bulk connections send WORK or KEYS at an\n"
         "  offered rate swept over % of the baseline's capacity, control connections send\n"
         "  PING/GET at a fixed rate; control latency counts from each request's intended send time\n"
         "servers:\n"
         "  --server PATH          start PATH --port 0 --mode M for each of --modes, one at a time,\n"
         "                         and stop it with SIGTERM (it must exit 0)\n"
         "  --server-args \"ARGS\"   more arguments for every started server, e.g. \"--threads=2\"\n"
         "  --modes LIST           the --mode values to start (default urt,asio)\n"
         "  --server-cpus LIST     run started servers on these CPUs (a cpulist, e.g. 0 or 0-1)\n"
         "  --client-cpus LIST     run the load generator on these CPUs\n"
         "  --client-priority P    run the load generator at SCHED_FIFO priority P, 1..99, so that\n"
         "                         busy server threads on its CPUs do not delay its sends (default:\n"
         "                         SCHED_OTHER); started servers still run at SCHED_OTHER\n"
         "  --target NAME=HOST:PORT  also run against a server already running (repeatable)\n"
         "  --baseline NAME        the server whose capacity is 100% and that ratios divide by\n"
         "                         (default asio when there is one, else the first)\n"
         "load:\n"
         "  --points LIST          bulk offered load in % of capacity, 0 < P <= 1000\n"
         "                         (default 10,25,50,75,90,100,120)\n"
         "  --duration S           measured seconds per point and round, 0.05..3600 (default 2)\n"
         "  --rounds N             sweeps per server, 1..100, the servers taking turns sweep by\n"
         "                         sweep; a point's figures are over every round's samples\n"
         "                         together; N x --duration at most 3600 (default 3)\n"
         "  --warmup S             unmeasured seconds before each point and capacity run,\n"
         "                         0..3600 (default 0.5)\n"
         "  --capacity-duration S  measured seconds of the closed-loop capacity run (default 1)\n"
         "  --capacity RATE        take RATE bulk requests/s as 100% (no capacity run)\n"
         "  --bulk work:US|keys:PATTERN  what bulk connections send (default work:200)\n"
         "  --bulk-conns N         bulk connections, 1..1024 (default 2 x the server's threads)\n"
         "  --control-conns N      control connections, 1..1024 (default 4)\n"
         "  --control-rate R       requests/s per control connection, (0..100000] (default 1000)\n"
         "  --keys N               keys SET before the run and read by GET, 1..1000000 (default 100)\n"
         "  --timeout S            a reply missing this long is an error, (0..3600] (default 5)\n"
         "  --spin-us auto|always|N  busy-poll (no sleep) when the next send is at most N us\n"
         "                         away, 0..10000000 (0: sleep until each send), or always;\n"
         "                         auto (default): always when --client-cpus and --server-cpus\n"
         "                         are given and share no CPU, else 0\n"
         "output:\n"
         "  --json FILE            every figure as JSON\n"
         "  --svg FILE             control p99 against bulk load, one line per server\n"
         "  --help                 this text\n"
         "Exit status: 0 when every reply came back and was no error and every started server\n"
         "exited 0; 1 otherwise (the message says what); 2 on a bad command line; 130 when\n"
         "interrupted.\n";
}

options parse_options(const std::vector<std::string>& args) {
  options o;
  bool modes_set = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (!arg.starts_with("--")) throw usage_error("unexpected argument \"" + std::string(arg) + "\"");
    std::string_view name = arg;
    std::string value;
    if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 == args.size()) throw usage_error(std::string(arg) + ": a value is missing");
      value = args[++i];
    }
    const std::string flag(name);
    if (name == "--server") {
      if (value.empty()) bad(flag, value, "is not a path");
      o.server = value;
    } else if (name == "--server-args") {
      o.server_args = split_blanks(value);
      for (const std::string& a : o.server_args) {
        if (a == "--port" || a.starts_with("--port=") || a == "--mode" || a.starts_with("--mode=")) {
          bad(flag, value, "sets " + a.substr(0, a.find('=')) + ", which urt-loadgen sets itself");
        }
      }
    } else if (name == "--modes") {
      o.modes = split(value, ',');
      for (const std::string& m : o.modes) {
        if (m != "urt" && m != "asio") bad(flag, value, "is not a list of urt and asio");
      }
      if (std::set<std::string>(o.modes.begin(), o.modes.end()).size() != o.modes.size()) {
        bad(flag, value, "names a mode twice");
      }
      modes_set = true;
    } else if (name == "--server-cpus") {
      o.server_cpus = parse_cpulist(flag, value);
    } else if (name == "--client-cpus") {
      o.client_cpus = parse_cpulist(flag, value);
    } else if (name == "--target") {
      const std::size_t eq = value.find('=');
      const std::size_t colon = value.rfind(':');
      if (eq == std::string::npos || colon == std::string::npos || colon < eq) {
        bad(flag, value, "is not NAME=HOST:PORT");
      }
      target t;
      t.name = value.substr(0, eq);
      t.host = value.substr(eq + 1, colon - eq - 1);
      if (!valid_name(t.name)) bad(flag, value, "has a NAME that is not 1..32 of [A-Za-z0-9._-]");
      if (t.host.empty()) bad(flag, value, "has no HOST");
      t.port = static_cast<std::uint16_t>(integer(flag, std::string_view(value).substr(colon + 1), 1, 65535));
      o.targets.push_back(std::move(t));
    } else if (name == "--baseline") {
      if (!valid_name(value)) bad(flag, value, "is not a server name");
      o.baseline = value;
    } else if (name == "--points") {
      o.points.clear();
      for (const std::string& p : split(value, ',')) {
        double v = 0;
        const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
        if (p.empty() || ec != std::errc{} || end != p.data() + p.size() || !std::isfinite(v) || v <= 0 ||
            v > 1000) {
          bad(flag, value, "is not a list of percentages in (0..1000]");
        }
        o.points.push_back(v);
      }
      std::sort(o.points.begin(), o.points.end());
      if (std::adjacent_find(o.points.begin(), o.points.end()) != o.points.end()) {
        bad(flag, value, "names a point twice");
      }
    } else if (name == "--duration") {
      o.duration_s = real(flag, value, 0.05, max_point_s, false);
    } else if (name == "--rounds") {
      o.rounds = static_cast<unsigned>(integer(flag, value, 1, 100));
    } else if (name == "--warmup") {
      o.warmup_s = real(flag, value, 0, 3600, false);
    } else if (name == "--capacity-duration") {
      o.capacity_s = real(flag, value, 0.05, 3600, false);
    } else if (name == "--capacity") {
      o.capacity = real(flag, value, 0, 10'000'000, true);
    } else if (name == "--timeout") {
      o.timeout_s = real(flag, value, 0, 3600, true);
    } else if (name == "--client-priority") {
      o.client_priority = static_cast<int>(integer(flag, value, 1, 99));
    } else if (name == "--spin-us") {
      if (value == "auto") {
        o.spin_us.reset();
      } else if (value == "always") {
        o.spin_us = spin_always;
      } else {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc{} || end != value.data() + value.size() ||
            v > 10'000'000) {
          bad(flag, value, "is not auto, always or an integer in 0..10000000");
        }
        o.spin_us = static_cast<std::uint32_t>(v);
      }
    } else if (name == "--bulk") {
      if (value.starts_with("work:")) {
        o.bulk = bulk_command::work;
        const std::string_view us = std::string_view(value).substr(5);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(us.data(), us.data() + us.size(), v);
        if (us.empty() || ec != std::errc{} || end != us.data() + us.size() || v < 1 || v > 1'000'000) {
          bad(flag, value, "is not work:US with US in 1..1000000");
        }
        o.work_us = static_cast<std::uint32_t>(v);
      } else if (value.starts_with("keys:") && value.size() > 5) {
        o.bulk = bulk_command::keys;
        o.keys_pattern = value.substr(5);
      } else {
        bad(flag, value, "is not work:US or keys:PATTERN");
      }
    } else if (name == "--bulk-conns") {
      o.bulk_conns = static_cast<unsigned>(integer(flag, value, 1, 1024));
    } else if (name == "--control-conns") {
      o.control_conns = static_cast<unsigned>(integer(flag, value, 1, 1024));
    } else if (name == "--control-rate") {
      o.control_rate = real(flag, value, 0, 100'000, true);
    } else if (name == "--keys") {
      o.keys = static_cast<unsigned>(integer(flag, value, 1, 1'000'000));
    } else if (name == "--json") {
      if (value.empty()) bad(flag, value, "is not a file name");
      o.json_path = value;
    } else if (name == "--svg") {
      if (value.empty()) bad(flag, value, "is not a file name");
      o.svg_path = value;
    } else {
      throw usage_error("unknown option " + flag);
    }
  }
  if (modes_set && o.server.empty()) throw usage_error("--modes: only with --server");
  if (!o.server_args.empty() && o.server.empty()) throw usage_error("--server-args: only with --server");
  if (!o.server_cpus.empty() && o.server.empty()) throw usage_error("--server-cpus: only with --server");
  // Every round's samples are kept until the end: bounded as one long point is.
  if (const double measured = static_cast<double>(o.rounds) * o.duration_s;
      measured > max_point_s) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "--rounds: %u rounds of --duration %g s measure %g s per point; at most %g s",
                  o.rounds, o.duration_s, measured, max_point_s);
    throw usage_error(text);
  }
  return o;
}

std::uint32_t client_spin_us(const options& o) noexcept {
  if (o.spin_us) return *o.spin_us;
  if (o.client_cpus.empty() || o.server_cpus.empty()) return 0;
  for (const int c : o.client_cpus) {
    if (std::find(o.server_cpus.begin(), o.server_cpus.end(), c) != o.server_cpus.end()) return 0;
  }
  return spin_always;
}

std::vector<target> resolve_targets(options& o) {
  std::vector<target> all;
  if (!o.server.empty()) {
    for (const std::string& m : o.modes) all.push_back({.name = m, .mode = m, .host = "127.0.0.1", .port = 0});
  }
  for (const target& t : o.targets) {
    for (const target& seen : all) {
      if (seen.name == t.name) throw usage_error("--target: the name \"" + t.name + "\" is used twice");
    }
    all.push_back(t);
  }
  if (all.empty()) throw usage_error("nothing to measure: give --server PATH or --target NAME=HOST:PORT");
  if (o.baseline.empty()) {
    o.baseline = all.front().name;
    for (const target& t : all) {
      if (t.name == "asio") o.baseline = "asio";
    }
  }
  const auto base = std::find_if(all.begin(), all.end(), [&](const target& t) { return t.name == o.baseline; });
  if (base == all.end()) bad("--baseline", o.baseline, "is not one of the servers");
  std::rotate(all.begin(), base, base + 1);  // the baseline runs first
  return all;
}

std::chrono::nanoseconds ns_of(double s) noexcept {
  constexpr double day_s = 86400;
  if (!(s > 0)) return std::chrono::nanoseconds(0);
  if (s >= day_s) return std::chrono::nanoseconds(static_cast<std::int64_t>(day_s * 1e9));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9 + 0.5));
}

unsigned server_threads(const options& o) {
  for (std::size_t i = 0; i < o.server_args.size(); ++i) {
    std::string_view v;
    if (o.server_args[i] == "--threads" && i + 1 < o.server_args.size()) {
      v = o.server_args[i + 1];
    } else if (o.server_args[i].starts_with("--threads=")) {
      v = std::string_view(o.server_args[i]).substr(10);
    } else {
      continue;
    }
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc{} && end == v.data() + v.size()) return n;
  }
  return 0;
}

}  // namespace loadgen
