// urt-kv's parts without a server: the request parser (every malformed
// case, and every way a valid request can arrive split), the glob matcher,
// the store (alone and under concurrent QSBR readers and writers), the
// command table, the metrics formats and the command line.
#include <doctest/doctest.h>
#include <urcu/urcu-qsbr.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "glob.hpp"
#include "metrics.hpp"
#include "options.hpp"
#include "protocol.hpp"
#include "store.hpp"

namespace {

using namespace std::string_view_literals;

std::vector<std::string> words(kv::request_parser& p, std::string_view data, kv::parse_result& r) {
  std::vector<std::string_view> args;
  r = p.parse(data, args);
  return {args.begin(), args.end()};
}

// The calling thread as a QSBR reader while it lives. A store must be
// destroyed by a thread that is no online reader (store.hpp): declare the
// store first.
struct reader {
  reader() { urcu_qsbr_register_thread(); }
  ~reader() { urcu_qsbr_unregister_thread(); }
};

}  // namespace

TEST_CASE("parser: well-formed multibulk and inline requests") {
  kv::request_parser p;
  kv::parse_result r;
  CHECK(words(p, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", r) == std::vector<std::string>{"GET", "k"});
  CHECK(r.status == kv::parse_status::complete);
  CHECK(r.consumed == 20);
  // Binary-safe: a bulk string may hold CR, LF and NUL.
  const std::string binary("*2\r\n$4\r\nECHO\r\n$3\r\na\r\0\r\n", 23);
  CHECK(words(p, binary, r) == std::vector<std::string>{"ECHO", std::string("a\r\0", 3)});
  CHECK(words(p, "PING\r\n", r) == std::vector<std::string>{"PING"});
  CHECK(words(p, "  set  k   v \n", r) == std::vector<std::string>{"set", "k", "v"});
  CHECK(r.consumed == 14);
  CHECK(words(p, "SET k \"a b\\n\\x41\"\r\n", r) == std::vector<std::string>{"SET", "k", "a b\nA"});
  CHECK(words(p, "SET k 'it\\'s'\n", r) == std::vector<std::string>{"SET", "k", "it's"});
  CHECK(words(p, "SET k \"\"\n", r) == std::vector<std::string>{"SET", "k", ""});
  // As Redis: \v and \f are blanks between words and after a closing
  // quote, but part of an unquoted word (redis-server answers ECHO a\vb
  // with "a\vb").
  CHECK(words(p, "ECHO a\vb\r\n", r) == std::vector<std::string>{"ECHO", "a\vb"});
  CHECK(words(p, "ECHO \f\vab\r\n", r) == std::vector<std::string>{"ECHO", "ab"});
  CHECK(words(p, "ECHO \"a\"\v\r\n", r) == std::vector<std::string>{"ECHO", "a"});
  // Empty requests are skipped, as Redis skips them.
  for (const std::string_view empty : {"*0\r\n"sv, "*-1\r\n"sv, "\r\n"sv, "   \n"sv}) {
    CAPTURE(empty);
    words(p, empty, r);
    CHECK(r.status == kv::parse_status::empty);
    CHECK(r.consumed == empty.size());
  }
}

TEST_CASE("parser: a request split anywhere is incomplete until its last byte") {
  kv::request_parser p;
  const std::string requests[] = {"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$10\r\n0123456789\r\n",
                                  "SET key \"quoted value\"\r\n"};
  for (const std::string& whole : requests) {
    for (std::size_t cut = 0; cut < whole.size(); ++cut) {
      CAPTURE(cut);
      kv::parse_result r;
      CHECK(words(p, std::string_view(whole).substr(0, cut), r).empty());  // no partial words
      CHECK(r.status == kv::parse_status::incomplete);
    }
    kv::parse_result r;
    CHECK(words(p, whole + "PING\r\n", r).size() == 3);
    CHECK(r.consumed == whole.size());  // a pipelined request behind it stays
  }
}

TEST_CASE("parser: a request that arrives in small reads is looked at once, not once per read") {
  // A DEL with 20,000 one-byte keys (about 140 KB) and a 64 KB inline line,
  // fed as a server receives them: the buffer grows by 30 bytes a read and
  // moves (a copy) between reads. The parser resumes where it stopped, so
  // the bytes it looks at stay linear in the request's size; parsing from
  // the start at every read looked at about 340 MB for the DEL.
  std::string del = "*20001\r\n$3\r\nDEL\r\n";
  for (int i = 0; i < 20000; ++i) {
    del += "$1\r\n" + std::string(1, static_cast<char>('a' + i % 26)) + "\r\n";
  }
  const std::string line = "ECHO " + std::string(60000, 'x') + "\r\n";
  for (const std::string& whole : {del, line}) {
    kv::request_parser p({.max_request = 1 << 20, .max_args = 1024 * 1024, .max_inline = 64 * 1024});
    std::vector<std::string_view> args;
    kv::parse_result r;
    std::string buffer;
    for (std::size_t have = 30;; have = std::min(whole.size(), have + 30)) {
      buffer = whole.substr(0, have);  // a fresh copy: the views move with it
      r = p.parse(buffer, args);
      if (r.status != kv::parse_status::incomplete) break;
      REQUIRE(have < whole.size());
    }
    CHECK(r.status == kv::parse_status::complete);
    CHECK(r.consumed == whole.size());
    CHECK(args.size() == (whole == del ? 20001u : 2u));
    const std::string last = whole == del ? std::string(1, static_cast<char>('a' + 19999 % 26))
                                          : std::string(60000, 'x');
    CHECK(args.back() == last);
    CHECK(p.scanned() <= 2 * whole.size());
  }
}

TEST_CASE("parser: every malformed request gets its error, fatal where framing is lost") {
  struct row {
    std::string_view input;
    std::string_view error;
    bool fatal;
  };
  const kv::parse_limits limits{.max_request = 64, .max_args = 8, .max_inline = 32};
  const row rows[] = {
      {"*x\r\n", "Protocol error: invalid multibulk length", true},
      {"*1x\r\n", "Protocol error: invalid multibulk length", true},
      {"*9\r\n", "Protocol error: invalid multibulk length", true},  // > max_args
      {"*99999999999999999999999\r\n", "Protocol error: invalid multibulk length", true},
      {"*1\rX", "Protocol error: invalid multibulk length", true},
      {"*1234567890123456789012345678901234567890", "Protocol error: too big mbulk count string",
       true},
      {"*1\r\nGET\r\n", "Protocol error: expected '$', got 'G'", true},
      {"*1\r\n\x01", "Protocol error: expected '$', got '\\x01'", true},
      {"*1\r\n$x\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$-1\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$+3\r\n", "Protocol error: invalid bulk length", true},
      // Leading zeros and -0, as redis-server answers them (string2ll).
      {"*01\r\n$4\r\nPING\r\n", "Protocol error: invalid multibulk length", true},
      {"*00\r\n", "Protocol error: invalid multibulk length", true},
      {"*-0\r\n", "Protocol error: invalid multibulk length", true},
      {"*1\r\n$04\r\nPING\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$00\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$-0\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$65\r\n",
       "Protocol error: a bulk string of 65 bytes is over the server's limit of 64 bytes "
       "(--max-request)",
       true},
      {"*1\r\n$9223372036854775807\r\n",
       "Protocol error: a bulk string of 9223372036854775807 bytes is over the server's limit of "
       "64 bytes (--max-request)",
       true},
      {"*1\r\n$9223372036854775808\r\n", "Protocol error: invalid bulk length", true},
      {"*1\r\n$12345678901234567890123456789012345\r\n",
       "Protocol error: too big bulk count string", true},
      {"*1\r\n$3\r\nabcXY", "Protocol error: expected CRLF after a bulk string of 3 bytes", true},
      {"*2\r\n$30\r\n012345678901234567890123456789\r\n$30\r\n",
       "Protocol error: request bigger than the server's limit of 64 bytes (--max-request)", true},
      {"0123456789012345678901234567890123456789", "Protocol error: too big inline request", true},
      {"SET k \"unterminated\r\n", "Protocol error: unbalanced quotes in request", false},
      {"SET k 'x\r\n", "Protocol error: unbalanced quotes in request", false},
      {"SET k \"a\"b\r\n", "Protocol error: unbalanced quotes in request", false},
      {"a b c d e f g h i\r\n", "Protocol error: more than 8 arguments in an inline request",
       false},
  };
  for (const row& x : rows) {
    CAPTURE(x.input);
    kv::request_parser p(limits);
    kv::parse_result r;
    words(p, x.input, r);
    CHECK(r.status == kv::parse_status::error);
    CHECK(r.error == x.error);
    CHECK(r.fatal == x.fatal);
    // INFO counts these as oversized_requests, the others as protocol_errors.
    CHECK(r.oversized == (x.error.find("--max-request") != std::string_view::npos));
    if (!x.fatal) CHECK(r.consumed == x.input.size());  // the line is skipped, the next one parses
  }
}

TEST_CASE("parser: random bytes never crash it and every result is consistent") {
  std::mt19937_64 rng(42);
  kv::request_parser p({.max_request = 4096, .max_args = 64, .max_inline = 1024});
  const std::string alphabet = "*$\r\n0123456789-+\"' \\xabcSETGET";
  for (int round = 0; round < 20000; ++round) {
    std::string data(rng() % 64, '\0');
    for (char& c : data) c = alphabet[rng() % alphabet.size()];
    kv::parse_result r;
    const std::vector<std::string> args = words(p, data, r);
    CHECK(r.consumed <= data.size());
    if (r.status == kv::parse_status::complete) CHECK(!args.empty());
    if (r.status != kv::parse_status::complete) CHECK(args.empty());
    if (r.status == kv::parse_status::error) CHECK(!r.error.empty());
    if (r.status == kv::parse_status::complete || r.status == kv::parse_status::empty ||
        (r.status == kv::parse_status::error && !r.fatal)) {
      CHECK(r.consumed > 0);  // progress: the server's loop cannot spin
    }
  }
}

TEST_CASE("replies: RESP2 encodings") {
  std::string out;
  kv::reply_simple(out, "OK");
  kv::reply_error(out, "ERR two\r\nlines");
  kv::reply_integer(out, -42);
  kv::reply_integer(out, INT64_MIN);
  kv::reply_bulk(out, "");
  kv::reply_bulk(out, "a\r\nb");
  kv::reply_null(out);
  kv::reply_array_header(out, 3);
  CHECK(out == "+OK\r\n-ERR two  lines\r\n:-42\r\n:-9223372036854775808\r\n$0\r\n\r\n$4\r\na\r\nb\r\n$-1\r\n*3\r\n");
}

TEST_CASE("glob: Redis's KEYS patterns") {
  struct row {
    std::string_view pattern, key;
    bool match;
  };
  const row rows[] = {
      {"*", "", true},          {"*", "anything", true},     {"key:*", "key:1", true},
      {"key:*", "kez:1", false}, {"h?llo", "hello", true},   {"h?llo", "hllo", false},
      {"h*llo", "heeeello", true}, {"h*llo", "hellox", false}, {"h[ae]llo", "hallo", true},
      {"h[ae]llo", "hillo", false}, {"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false},
      {"h[a-b]llo", "hbllo", true}, {"h[b-a]llo", "hallo", true}, {"h[a-b]llo", "hcllo", false},
      {"h\\*llo", "h*llo", true},  {"h\\*llo", "hallo", false}, {"[\\]]", "]", true},
      {"a*b*c", "aXbYc", true},   {"a*b*c", "aXbY", false},    {"*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
      {"key[", "key", false},     {"[abc", "b", true},         {"**", "x", true},
      {"\\", "\\", true},
      // Redis's quirks (glob.hpp), each checked against redis-server 7.0's KEYS.
      {"[a-]", "a", true},       {"[a-]x]", "_", true},       {"[a-]x]", "x", true},
      {"[a-]x]", "b", false},     {"[a-\xff]", "\x80", false}, {"[a-\xff]", "\xff", true},
      {"[a-\xff]", "b", false},    {"[\x01-\x90]", "\x85", false}, {"[\x90-\xa0]", "\x95", true},
      {"**", "", false},          {"?*", "", false},           {"", "", true},
  };
  for (const row& x : rows) {
    CAPTURE(x.pattern);
    CAPTURE(x.key);
    CHECK(kv::glob_match(x.pattern, x.key) == x.match);
  }
}

TEST_CASE("store: GET SET DEL EXISTS and the size") {
  kv::store db;  // before the reader: destroyed once this thread is no reader
  reader r;
  std::string out;
  db.get("k", out);
  CHECK(out == "$-1\r\n");
  db.set("k", "v1");
  db.set("k", "v2");  // replaces: the old entry goes to call_rcu
  out.clear();
  db.get("k", out);
  CHECK(out == "$2\r\nv2\r\n");
  CHECK(db.exists("k"));
  CHECK(db.size() == 1);
  CHECK(db.del("k"));
  CHECK_FALSE(db.del("k"));
  CHECK_FALSE(db.exists("k"));
  CHECK(db.size() == 0);
  db.set(std::string("bin\0key", 7), std::string("\0\r\n", 3));
  out.clear();
  db.get(std::string("bin\0key", 7), out);
  CHECK(out == std::string("$3\r\n\0\r\n\r\n", 9));
  urcu_qsbr_quiescent_state();
}

TEST_CASE("store: KEYS over the shards finds each matching key once") {
  kv::store db;  // before the reader: destroyed once this thread is no reader
  reader r;
  for (int i = 0; i < 5000; ++i) db.set("key:" + std::to_string(i), "v");
  db.set("other", "v");
  CHECK(db.size() == 5001);
  std::string out;
  std::size_t matched = 0;
  for (unsigned s = 0; s < kv::store::shard_count; ++s) matched += db.match_shard(s, "key:1*", out);
  CHECK(matched == 1111);  // 1, 10-19, 100-199, 1000-1999
  std::vector<bool> seen(5000, false);
  for (std::size_t pos = 0; pos < out.size();) {
    REQUIRE(out[pos] == '$');
    const std::size_t nl = out.find("\r\n", pos);
    const std::size_t len = std::stoul(out.substr(pos + 1, nl - pos - 1));
    const std::string key = out.substr(nl + 2, len);
    REQUIRE(key.starts_with("key:1"));
    const int i = std::stoi(key.substr(4));
    CHECK_FALSE(seen[static_cast<std::size_t>(i)]);
    seen[static_cast<std::size_t>(i)] = true;
    pos = nl + 2 + len + 2;
  }
  urcu_qsbr_quiescent_state();
}

TEST_CASE("store: concurrent readers and writers keep each key's history") {
  kv::store db;
  constexpr int threads = 4;
  constexpr int keys = 64;
  constexpr int rounds = 400;
  std::atomic<int> bad{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      reader r;
      std::string out;
      for (int round = 0; round < rounds; ++round) {
        for (int k = 0; k < keys; ++k) {
          // Own keys: every read sees this thread's last write.
          // (append, not "t" + ...: GCC 12's false -Wrestrict, PR 105329)
          std::string own = "t";
          own += std::to_string(t);
          own += ':';
          own += std::to_string(k);
          const std::string value = std::to_string(round);
          db.set(own, value);
          out.clear();
          db.get(own, out);
          std::string expected;
          kv::reply_bulk(expected, value);
          if (out != expected) bad.fetch_add(1);
          // Shared keys: written by all, read by all; any value is a whole one.
          std::string shared = "shared:";
          shared += std::to_string(k);
          db.set(shared, std::string(static_cast<std::size_t>(t + 1), static_cast<char>('a' + t)));
          out.clear();
          db.get(shared, out);
          if (out.size() < 7 || out[0] != '$') bad.fetch_add(1);
          if (round % 2 == 1) {
            if (!db.del(own)) bad.fetch_add(1);
            if (db.exists(own)) bad.fetch_add(1);
          }
        }
        urcu_qsbr_quiescent_state();  // as a worker does at its scheduling points
      }
    });
  }
  for (std::thread& th : pool) th.join();
  CHECK(bad.load() == 0);
  // The last round (odd) removed every own key: the shared ones are left.
  CHECK(db.size() == keys);
}

TEST_CASE("commands: plan, control replies and their errors") {
  kv::store db;  // before the reader: destroyed once this thread is no reader
  kv::server_counters counters;
  reader r;
  kv::command_context ctx{db, counters, [&] {
                            kv::metrics_view v;
                            v.mode = "asio";
                            v.counters = &counters;
                            v.keys = db.size();
                            v.max_clients = 77;
                            v.idle_timeout_s = 300;
                            v.port = 6379;
                            return v;
                          }};
  const auto run = [&](std::vector<std::string_view> args) {
    std::string out;
    const bool open = kv::run_control(args, out, ctx);
    return std::make_pair(out, open);
  };
  CHECK(run({"PING"}).first == "+PONG\r\n");
  CHECK(run({"ping", "hi"}).first == "$2\r\nhi\r\n");
  CHECK(run({"SET", "k", "v"}).first == "+OK\r\n");
  CHECK(run({"GET", "k"}).first == "$1\r\nv\r\n");
  CHECK(run({"EXISTS", "k", "k", "nope"}).first == ":2\r\n");
  CHECK(run({"DBSIZE"}).first == ":1\r\n");
  CHECK(run({"DEL", "k", "nope"}).first == ":1\r\n");
  CHECK(run({"ECHO", "x"}).first == "$1\r\nx\r\n");
  CHECK(run({"SELECT", "0"}).first == "+OK\r\n");
  CHECK(run({"CONFIG", "GET", "save"}).first == "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
  // Patterns, several, each parameter once (Redis 7).
  CHECK(run({"CONFIG", "GET", "MAXCLIENTS"}).first == "*2\r\n$10\r\nMAXCLIENTS\r\n$2\r\n77\r\n");
  CHECK(run({"CONFIG", "GET", "maxc*", "*clients", "time?ut"}).first ==
        "*4\r\n$10\r\nmaxclients\r\n$2\r\n77\r\n$7\r\ntimeout\r\n$3\r\n300\r\n");
  CHECK(run({"CONFIG", "GET", "nosuch"}).first == "*0\r\n");
  CHECK(run({"COMMAND", "COUNT"}).first == ":14\r\n");
  CHECK(run({"COMMAND", "DOCS"}).first == "*0\r\n");
  // Several INFO sections (Redis 7), an unknown one adds nothing.
  const std::string two = run({"INFO", "keyspace", "nosuch", "CLIENTS"}).first;
  CHECK(two.find("# Keyspace\r\n") != std::string::npos);
  CHECK(two.find("# Clients\r\n") != std::string::npos);
  CHECK(two.find("# Server\r\n") == std::string::npos);
  CHECK(run({"QUIT"}) == std::make_pair(std::string("+OK\r\n"), false));
  CHECK(run({"INFO", "keyspace"}).first.starts_with("$"));
  CHECK(counters.command_errors.load() == 0);

  CHECK(run({"GET"}).first == "-ERR wrong number of arguments for 'get' command\r\n");
  CHECK(run({"SET", "k", "v", "EX", "10"}).first == "-ERR syntax error\r\n");
  CHECK(run({"KEYS"}).first == "-ERR wrong number of arguments for 'keys' command\r\n");
  CHECK(run({"WORK", "-1"}).first == "-ERR WORK takes microseconds as an integer in 0..1000000, not '-1'\r\n");
  CHECK(run({"WORK", "1000001"}).first.starts_with("-ERR WORK takes microseconds"));
  CHECK(run({"SELECT", "1"}).first == "-ERR DB index is out of range\r\n");
  CHECK(run({"SELECT", "x"}).first == "-ERR value is not an integer or out of range\r\n");
  CHECK(run({"FLUSHALL", "x"}).first ==
        "-ERR unknown command 'FLUSHALL', with args beginning with: 'x' \r\n");
  // Redis cuts the argument list once its text reaches 128 bytes, each
  // argument to what is left of the 128.
  const std::string a100(100, 'a');
  const std::string b100(100, 'b');
  CHECK(run({"NOPE", a100, b100, "c"}).first == "-ERR unknown command 'NOPE', with args beginning with: '" +
                                                     a100 + "' '" + std::string(25, 'b') + "' \r\n");
  CHECK(run({"CONFIG", "GET"}).first == "-ERR wrong number of arguments for 'config|get' command\r\n");
  CHECK(run({"CONFIG"}).first == "-ERR wrong number of arguments for 'config' command\r\n");
  CHECK(run({"COMMAND", "COUNT", "x"}).first ==
        "-ERR wrong number of arguments for 'command|count' command\r\n");
  // Redis prints the name and arguments as C strings: each ends at a NUL.
  using namespace std::string_literals;
  CHECK(run({"NO\0PE"s, "a\0b"s, "c"}).first ==
        "-ERR unknown command 'NO', with args beginning with: 'a' 'c' \r\n");
  CHECK(counters.command_errors.load() == 13);

  CHECK(kv::plan(std::vector<std::string_view>{"keys", "*"}).bulk == kv::bulk_kind::keys);
  const kv::command_plan work = kv::plan(std::vector<std::string_view>{"WORK", "250"});
  CHECK(work.bulk == kv::bulk_kind::work);
  CHECK(work.cls == kv::command_class::bulk);
  CHECK(work.work == std::chrono::microseconds{250});
  CHECK(kv::plan(std::vector<std::string_view>{"WORK", "x"}).bulk == kv::bulk_kind::none);
  CHECK(kv::plan(std::vector<std::string_view>{"GET", "k"}).cls == kv::command_class::control);
  urcu_qsbr_quiescent_state();
}

// One sample line of the Prometheus text format:
// `name{label="value",...} number`, with the number possibly +Inf/-Inf/NaN.
// (Written by hand: <regex> trips GCC 12's -Wmaybe-uninitialized at -O1.)
static bool is_prometheus_sample(std::string_view l) {
  auto name_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  auto name_char = [&](char c) { return name_start(c) || std::isdigit(static_cast<unsigned char>(c)); };
  std::size_t i = 0;
  if (i == l.size() || !name_start(l[i])) return false;
  while (i < l.size() && name_char(l[i])) ++i;
  if (i < l.size() && l[i] == '{') {
    ++i;
    while (i < l.size() && l[i] != '}') {
      if (!name_start(l[i]) || l[i] == ':') return false;
      while (i < l.size() && name_char(l[i]) && l[i] != ':') ++i;
      if (l.substr(i, 2) != "=\"") return false;
      i += 2;
      while (i < l.size() && l[i] != '"') i += l[i] == '\\' ? 2 : 1;
      if (i >= l.size()) return false;
      ++i;  // closing quote
      if (i < l.size() && l[i] == ',') ++i;
    }
    if (i == l.size()) return false;
    ++i;  // '}'
  }
  if (i == l.size() || l[i] != ' ') return false;
  const std::string_view value = l.substr(i + 1);
  if (value == "+Inf" || value == "-Inf" || value == "NaN") return true;
  if (value.empty()) return false;
  return value.find_first_not_of("+-0123456789.eE") == std::string_view::npos;
}

TEST_CASE("metrics: histogram buckets, quantiles and both text formats") {
  using h = kv::latency_histogram;
  // Buckets are ordered, contiguous, and hold what they claim.
  for (const std::uint64_t v : std::initializer_list<std::uint64_t>{
           0, 1, 7, 8, 9, 15, 16, 1000, 123456789, (std::uint64_t{1} << 40) + 5, UINT64_MAX}) {
    CAPTURE(v);
    const unsigned b = h::bucket_of(v);
    REQUIRE(b < h::bucket_count);
    CHECK(h::upper_bound(b) >= v);
    if (b > 0) CHECK(h::upper_bound(b - 1) < v);
  }
  kv::server_counters c;
  for (int i = 1; i <= 1000; ++i) c.latency[0].record(static_cast<std::uint64_t>(i) * 1000);
  const h::snapshot s = c.latency[0].read();
  CHECK(s.count == 1000);
  CHECK(s.quantile_ns(0.5) >= 500'000);
  CHECK(s.quantile_ns(0.5) < 500'000 * 1.125 + 1);
  CHECK(s.quantile_ns(1.0) >= 1'000'000);
  CHECK(s.count_below_pow2(20) == 1000);  // 2^20 ns = 1048.576 us: every value is below
  CHECK(s.count_below_pow2(10) == 1);     // 1000 ns only

  kv::metrics_view v;
  v.mode = "urt";
  v.counters = &c;
  v.threads = 2;
  v.workers.resize(2);
  v.workers[1].worker = 1;
  v.workers[1].completed = 7;
  v.workers[1].fifo_ns = 2'500'000'000;
  v.workers[1].idle_ns = 1'999;
  v.workers[1].io_ring_error = EPERM;
  const std::string info = kv::info_text(v);
  CHECK(info.find("# Latency\r\n") != std::string::npos);
  CHECK(info.find("control_latency_us:p50=") != std::string::npos);
  CHECK(info.find("worker_1:pu=0,accepted=0,completed=7") != std::string::npos);
  CHECK(info.find(",fifo_us=2500000,normal_us=0,idle_us=1,io_ring_error=" + std::to_string(EPERM) +
                  "\r\n") != std::string::npos);
  CHECK(info.find(",idle_us=0,io_ring_error=0\r\n") != std::string::npos);  // worker 0
  const std::string_view clients[] = {"CLIENTS"};
  CHECK(kv::info_text(v, clients) ==
        "# Clients\r\nconnected_clients:0\r\nmaxclients:0\r\nblocked_clients:0\r\n");
  const std::string_view nosuch[] = {"nosuch"};
  CHECK(kv::info_text(v, nosuch).empty());
  // INFO parsers read a line starting with # as a section: only headers do.
  for (std::size_t at = info.find('#'); at != std::string::npos; at = info.find('#', at + 1)) {
    CHECK((at == 0 || info.compare(at - 2, 2, "\r\n") == 0));
    const std::string_view header = std::string_view(info).substr(at, info.find("\r\n", at) - at);
    CAPTURE(header);
    CHECK(header.find(' ') == 1);
    CHECK(header.find(' ', 2) == std::string_view::npos);  // "# Name", one word
  }
  CHECK(info.find("\r\nused_memory:") != std::string::npos);

  // Prometheus: every line a comment or `name{labels} value`; histogram
  // buckets cumulative up to +Inf = _count.
  const std::string prom = kv::prometheus_text(v);
  CHECK(is_prometheus_sample("a_b{x=\"1\",y=\"q\\\"\"} 2.5e3"));
  CHECK(is_prometheus_sample("up +Inf"));
  CHECK_FALSE(is_prometheus_sample("1up 3"));
  CHECK_FALSE(is_prometheus_sample("up{x=1} 3"));
  CHECK_FALSE(is_prometheus_sample("up{x=\"1\" 3"));
  CHECK_FALSE(is_prometheus_sample("up 3 4"));
  std::size_t lines = 0;
  for (std::size_t pos = 0; pos < prom.size();) {
    const std::size_t nl = prom.find('\n', pos);
    REQUIRE(nl != std::string::npos);
    const std::string l = prom.substr(pos, nl - pos);
    CAPTURE(l);
    CHECK((l.starts_with("# HELP ") || l.starts_with("# TYPE ") || is_prometheus_sample(l)));
    pos = nl + 1;
    ++lines;
  }
  CHECK(lines > 50);
  CHECK(prom.find("urt_kv_command_duration_seconds_bucket{class=\"control\",le=\"+Inf\"} 1000\n") !=
        std::string::npos);
  CHECK(prom.find("urt_kv_command_duration_seconds_count{class=\"control\"} 1000\n") != std::string::npos);
  CHECK(prom.find("urt_worker_tasks_completed_total{worker=\"1\"} 7\n") != std::string::npos);
  CHECK(prom.find("urt_worker_time_seconds_total{worker=\"1\",state=\"fifo\"} 2.500000000\n") !=
        std::string::npos);
  CHECK(prom.find("urt_worker_time_seconds_total{worker=\"1\",state=\"idle\"} 0.000001999\n") !=
        std::string::npos);
  CHECK(prom.find("urt_worker_time_seconds_total{worker=\"0\",state=\"normal\"} 0.000000000\n") !=
        std::string::npos);
  CHECK(prom.find("# TYPE urt_worker_io_ring_error gauge\n") != std::string::npos);
  CHECK(prom.find("urt_worker_io_ring_error{worker=\"1\"} " + std::to_string(EPERM) + "\n") !=
        std::string::npos);
  CHECK(prom.find("urt_worker_io_ring_error{worker=\"0\"} 0\n") != std::string::npos);
}

TEST_CASE("options: defaults, values, and errors naming the option and the value") {
  const kv::options d = kv::parse_options({});
  CHECK(d.port == 6380);
  CHECK(d.mode == kv::server_mode::urt);
  CHECK(d.bulk_priority < d.control_priority);
  const kv::options o = kv::parse_options({"--port", "0", "--mode=asio", "--threads", "3",
                                           "--max-request", "4096", "--idle-timeout", "0",
                                           "--metrics-port", "9100", "--idle-spin-us=0"});
  CHECK(o.port == 0);
  CHECK(o.mode == kv::server_mode::asio);
  CHECK(o.threads == 3);
  CHECK(o.max_request == 4096);
  CHECK(o.idle_timeout.count() == 0);
  CHECK(o.metrics_port == 9100u);
  CHECK(o.idle_spin == std::chrono::microseconds{0});
  CHECK(d.idle_spin == std::chrono::microseconds{500});
  CHECK(d.binding == urt::worker_binding::llc);
  CHECK(kv::parse_options({"--bind", "pu"}).binding == urt::worker_binding::pu);
  CHECK(kv::parse_options({"--bind=workers"}).binding == urt::worker_binding::workers);
  struct row {
    std::vector<std::string> args;
    std::string message;
  };
  const row rows[] = {
      {{"--port", "65536"}, "--port: \"65536\" is not an integer in 0..65535"},
      {{"--port", "-1"}, "--port: \"-1\" is not an integer in 0..65535"},
      {{"--port"}, "--port needs a value"},
      {{"--mode", "tokio"}, "--mode: \"tokio\" is not urt or asio"},
      {{"--threads", "0"}, "--threads: \"0\" is not an integer in 1..1024"},
      {{"--control-priority", "100"}, "--control-priority: \"100\" is not an integer in 1..99"},
      {{"--bulk-priority", "80"}, "--bulk-priority 80 must be below --control-priority 80"},
      {{"--slice-us", "0"}, "--slice-us: \"0\" is not an integer in 1..1000"},
      {{"--max-clients", "1e3"}, "--max-clients: \"1e3\" is not an integer in 1..1000000"},
      {{"--max-request", "63"}, "--max-request: \"63\" is not an integer in 64..536870912"},
      {{"--idle-timeout", "99999999999999999999"},
       "--idle-timeout: \"99999999999999999999\" is not an integer in 0..86400"},
      {{"--idle-spin-us", "10001"}, "--idle-spin-us: \"10001\" is not an integer in 0..10000"},
      {{"--bind", "core"}, "--bind: \"core\" is not pu, llc or workers"},
      {{"--bind"}, "--bind needs a value"},
      {{"--bogus"}, "unknown option \"--bogus\" (see --help)"},
      {{"6380"}, "unexpected argument \"6380\""},
  };
  for (const row& x : rows) {
    CAPTURE(x.message);
    CHECK_THROWS_WITH_AS(static_cast<void>(kv::parse_options(x.args)), x.message.c_str(), kv::usage_error);
  }
}
