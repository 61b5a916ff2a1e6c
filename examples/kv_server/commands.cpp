#include "commands.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "glob.hpp"
#include "protocol.hpp"

namespace kv {
namespace {

using args_t = std::span<const std::string_view>;

// GET SET PING ECHO DEL EXISTS DBSIZE INFO KEYS WORK QUIT SELECT CONFIG
// COMMAND: what COMMAND COUNT says.
constexpr std::size_t command_count = 14;

// ASCII lower case (command and parameter names).
std::string lower_case(std::string_view text) {
  std::string lower(text);
  for (char& ch : lower) ch = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  return lower;
}

// Redis's error texts, so that clients that match on them work.
void wrong_arity(std::string& out, std::string_view name) {
  reply_error(out, "ERR wrong number of arguments for '" + lower_case(name) + "' command");
}

void unknown_command(std::string& out, args_t args) {
  // As Redis 7 (processCommand): the name cut at 128 bytes; the arguments
  // added while their text is under 128 bytes, each cut to what is left.
  // Redis formats them as C strings (%.*s): each also ends at a NUL.
  const auto c_string = [](std::string_view text) { return text.substr(0, text.find('\0')); };
  std::string listed;
  for (std::size_t i = 1; i < args.size() && listed.size() < 128; ++i) {
    const std::size_t room = 128 - listed.size();
    listed += '\'';
    listed += c_string(args[i]).substr(0, room);
    listed += "' ";
  }
  std::string message = "ERR unknown command '";
  message += c_string(args[0]).substr(0, 128);
  message += "', with args beginning with: ";
  message += listed;
  reply_error(out, message);
}

bool parse_work(std::string_view text, std::chrono::nanoseconds& d) noexcept {
  std::int64_t us = 0;
  if (!parse_int64(text, us) || us < 0 || us > max_work_us) return false;
  d = std::chrono::microseconds{us};
  return true;
}

}  // namespace

command_plan plan(args_t args) noexcept {
  command_plan p;
  if (args.empty()) return p;
  if (equals_nocase(args[0], "keys") && args.size() == 2) {
    p.cls = command_class::bulk;
    p.bulk = bulk_kind::keys;
    p.pattern = args[1];
  } else if (equals_nocase(args[0], "work") && args.size() == 2 && parse_work(args[1], p.work)) {
    p.cls = command_class::bulk;
    p.bulk = bulk_kind::work;
  }
  return p;
}

bool run_control(args_t args, std::string& out, command_context& ctx) {
  const std::string_view name = args[0];
  const std::size_t n = args.size();
  const auto is = [&](std::string_view c) { return equals_nocase(name, c); };
  const auto error = [&](std::string_view text) {
    ctx.counters.add(ctx.counters.command_errors);
    reply_error(out, text);
  };
  const auto arity = [&] {
    ctx.counters.add(ctx.counters.command_errors);
    wrong_arity(out, name);
  };
  if (is("get")) {
    if (n != 2) return arity(), true;
    ctx.db.get(args[1], out);
  } else if (is("set")) {
    if (n < 3) return arity(), true;
    if (n > 3) return error("ERR syntax error"), true;  // no EX/PX/NX/XX options
    ctx.db.set(args[1], args[2]);
    reply_simple(out, "OK");
  } else if (is("ping")) {
    if (n > 2) return arity(), true;
    if (n == 2) {
      reply_bulk(out, args[1]);
    } else {
      reply_simple(out, "PONG");
    }
  } else if (is("echo")) {
    if (n != 2) return arity(), true;
    reply_bulk(out, args[1]);
  } else if (is("del") || is("exists")) {
    if (n < 2) return arity(), true;
    const bool del = is("del");
    std::int64_t count = 0;
    for (std::size_t i = 1; i < n; ++i) count += del ? ctx.db.del(args[i]) : ctx.db.exists(args[i]);
    reply_integer(out, count);
  } else if (is("dbsize")) {
    if (n != 1) return arity(), true;
    reply_integer(out, static_cast<std::int64_t>(ctx.db.size()));
  } else if (is("info")) {
    reply_bulk(out, info_text(ctx.view(), args.subspan(1)));
  } else if (is("keys")) {
    return arity(), true;  // a well-formed KEYS is bulk
  } else if (is("work")) {
    if (n != 2) return arity(), true;
    error("ERR WORK takes microseconds as an integer in 0.." + std::to_string(max_work_us) +
          ", not '" + std::string(args[1].substr(0, 64)) + "'");
  } else if (is("quit")) {
    reply_simple(out, "OK");
    return false;
  } else if (is("select")) {
    if (n != 2) return arity(), true;
    std::int64_t db = 0;
    if (!parse_int64(args[1], db)) return error("ERR value is not an integer or out of range"), true;
    if (db != 0) return error("ERR DB index is out of range"), true;  // one database
    reply_simple(out, "OK");
  } else if (is("config")) {
    // CONFIG GET pattern... as Redis 7, over the parameters urt-kv has (what
    // redis-benchmark asks before it starts: save and appendonly; it
    // persists nothing). Each matching parameter once, in this order.
    if (n < 2) return arity(), true;
    if (!equals_nocase(args[1], "get")) {
      return error("ERR urt-kv supports only CONFIG GET <pattern> [<pattern> ...]"), true;
    }
    if (n < 3) return ctx.counters.add(ctx.counters.command_errors), wrong_arity(out, "config|get"), true;
    const metrics_view v = ctx.view();
    const std::pair<std::string_view, std::string> params[] = {
        {"appendonly", "no"},
        {"maxclients", std::to_string(v.max_clients)},
        {"port", std::to_string(v.port)},
        {"save", ""},
        {"timeout", std::to_string(v.idle_timeout_s)}};
    // As Redis: a name without *?[ is echoed as sent (MAXCLIENTS), a
    // pattern's matches by their own names.
    std::vector<std::string> patterns;
    for (std::size_t i = 2; i < n; ++i) patterns.push_back(lower_case(args[i]));
    std::vector<std::pair<std::string_view, const std::string*>> found;
    for (const auto& param : params) {
      for (std::size_t i = 2; i < n; ++i) {
        if (glob_match(patterns[i - 2], param.first)) {
          const bool exact = args[i].find_first_of("*?[") == std::string_view::npos;
          found.emplace_back(exact ? args[i] : param.first, &param.second);
          break;
        }
      }
    }
    reply_array_header(out, 2 * found.size());
    for (const auto& [shown, value] : found) {
      reply_bulk(out, shown);
      reply_bulk(out, *value);
    }
  } else if (is("command")) {
    // COMMAND COUNT: the commands urt-kv runs. redis-cli asks for COMMAND
    // DOCS on connecting: none (it then works without hints), and so for
    // the other subcommands.
    if (n >= 2 && equals_nocase(args[1], "count")) {
      if (n > 2)
        return ctx.counters.add(ctx.counters.command_errors), wrong_arity(out, "command|count"),
               true;
      reply_integer(out, static_cast<std::int64_t>(command_count));
    } else {
      reply_array_header(out, 0);
    }
  } else {
    ctx.counters.add(ctx.counters.command_errors);
    unknown_command(out, args);
  }
  return true;
}

void spin_for(std::chrono::nanoseconds d) noexcept {
  // Time the thread ran, not wall time: a thread the OS preempts meanwhile
  // (a client on the same CPU) has not done the work. Counted in wall
  // time, one long spin absorbed every preemption while a bulk command
  // sliced at scheduling points lost the ones between its slices, so WORK
  // cost the two modes different amounts of CPU. The thread's CPU clock is
  // a system call (0.5 us on a VM); the wall clock is not, and two reads of
  // it more than `descheduled` apart mean the thread was off its CPU in
  // between: such a gap counts as `descheduled` only (not 0, so that a
  // clock slower than that to read still ends the spin).
  using clock = std::chrono::steady_clock;
  constexpr std::chrono::nanoseconds descheduled = std::chrono::microseconds(5);
  std::chrono::nanoseconds ran{0};
  for (auto last = clock::now(); ran < d;) {
    const auto now = clock::now();
    ran += std::min<std::chrono::nanoseconds>(now - last, descheduled);
    last = now;
  }
}

}  // namespace kv
