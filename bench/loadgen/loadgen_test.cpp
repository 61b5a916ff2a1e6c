// Tests of urt-loadgen's parts that need no server: the incremental RESP
// reply parser (every reply split at every byte, malformed replies), the
// options (defaults, every bad value rejected naming the flag and the
// value, the servers' order), the percentiles, and the table and SVG on a
// made-up result (the SVG's well-formedness is checked by loadgen_test.py
// with a real XML parser on a real run's output).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "resp.hpp"

namespace {

using loadgen::resp::reply;
using loadgen::resp::reply_parser;

struct seen {
  char type;
  bool error;
  bool null;
  std::string text;
  bool operator==(const seen&) const = default;
};

// Feeds `stream` in pieces of `step` bytes (0: whole); false on a protocol error.
bool parse(std::string_view stream, std::size_t step, std::vector<seen>& out, std::string* error = nullptr) {
  reply_parser p;
  const auto on = [&](const reply& r) { out.push_back({r.type, r.error, r.null, std::string(r.text)}); };
  if (step == 0) step = stream.size() + 1;
  for (std::size_t i = 0; i < stream.size(); i += step) {
    if (!p.feed(stream.substr(i, step), on)) {
      if (error != nullptr) *error = p.error();
      return false;
    }
  }
  return p.idle();
}

std::vector<std::string> args(std::initializer_list<const char*> a) { return {a.begin(), a.end()}; }

std::string usage_message(const std::vector<std::string>& a) {
  try {
    (void)loadgen::parse_options(a);
  } catch (const loadgen::usage_error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("resp: every reply type, split at every byte") {
  using namespace std::string_literals;
  const std::string stream =
      "+PONG\r\n"
      "-ERR unknown command 'WORK'\r\n"
      ":42\r\n"
      "$5\r\nhello\r\n"
      "$0\r\n\r\n"
      "$-1\r\n"
      "*0\r\n"
      "*-1\r\n"
      "*3\r\n$1\r\na\r\n:1\r\n*2\r\n+x\r\n$2\r\n\r\n\r\n"  // nested; a payload that is CRLF
      "*2\r\n+ok\r\n-ERR inner\r\n"
      "$10\r\nbinary\r\n\0\xff\r\n"
      "+OK\r\n"s;  // s: the payload holds a NUL
  const std::vector<seen> want{
      {'+', false, false, "PONG"}, {'-', true, false, "ERR unknown command 'WORK'"},
      {':', false, false, ""},     {'$', false, false, ""},
      {'$', false, false, ""},     {'$', false, true, ""},
      {'*', false, false, ""},     {'*', false, true, ""},
      {'*', false, false, ""},     {'*', true, false, ""},
      {'$', false, false, ""},     {'+', false, false, "OK"},
  };
  for (std::size_t step = 0; step <= stream.size(); ++step) {
    CAPTURE(step);
    std::vector<seen> got;
    REQUIRE(parse(stream, step, got));
    CHECK(got == want);
  }
}

TEST_CASE("resp: a reply is reported only once it is complete") {
  reply_parser p;
  int n = 0;
  const auto on = [&](const reply&) { ++n; };
  CHECK(p.feed("*2\r\n$3\r\nab", on));
  CHECK(n == 0);
  CHECK_FALSE(p.idle());
  CHECK(p.feed("c\r\n", on));
  CHECK(n == 0);
  CHECK(p.feed(":7\r", on));
  CHECK(n == 0);
  CHECK(p.feed("\n", on));
  CHECK(n == 1);
  CHECK(p.idle());
}

TEST_CASE("resp: a large array costs no memory per element") {
  std::string stream = "*100000\r\n";
  for (int i = 0; i < 100000; ++i) stream += "$12\r\nloadgen:key:\r\n";
  std::vector<seen> got;
  REQUIRE(parse(stream, 4093, got));
  REQUIRE(got.size() == 1);
  CHECK(got[0].type == '*');
}

TEST_CASE("resp: malformed replies are protocol errors") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"?what\r\n", "unknown reply type"},
      {"+PONG\n", "not ended by CRLF"},
      {"\r\n", "empty reply line"},
      {":x1\r\n", "integer"},
      {"$abc\r\n", "bulk string length"},
      {"$-2\r\n", "bulk string length"},
      {"$3\r\nabcd\r\n", "not followed by CRLF"},
      {"*-5\r\n", "array length"},
      {"*1x\r\n", "array length"},
      {[] {
         std::string s;
         for (int i = 0; i < 33; ++i) s += "*1\r\n";
         return s;
       }(),
       "nested deeper"},
      {"+" + std::string(70000, 'a'), "longer than 64 KiB"},
  };
  for (const auto& [stream, why] : cases) {
    CAPTURE(stream.substr(0, 40));
    for (const std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
      std::vector<seen> got;
      std::string error;
      CHECK_FALSE(parse(stream, step, got, &error));
      CHECK(error.find(why) != std::string::npos);
    }
  }
  // After an error every call fails.
  reply_parser p;
  const auto on = [](const reply&) {};
  CHECK_FALSE(p.feed("!\r\n", on));
  CHECK_FALSE(p.feed("+OK\r\n", on));
}

TEST_CASE("options: defaults and values") {
  const loadgen::options d = loadgen::parse_options({});
  CHECK(d.points == std::vector<double>{10, 25, 50, 75, 90, 100, 120});
  CHECK(d.duration_s == 2.0);
  CHECK(d.rounds == 3);
  CHECK(d.control_conns == 4);
  CHECK(d.control_rate == 1000);
  CHECK(d.bulk == loadgen::bulk_command::work);
  CHECK(d.work_us == 200);
  CHECK(d.bulk_conns == 0);

  const loadgen::options o = loadgen::parse_options(
      args({"--server", "/bin/true", "--server-args=--threads=3 --slice-us 5",
            "--points=100,10,50.5", "--duration=0.25", "--bulk", "keys:user:*",
            "--control-rate=250", "--target", "redis=localhost:6379", "--server-cpus=0-1,3",
            "--json=x.json", "--svg", "x.svg", "--modes=asio", "--rounds", "5"}));
  CHECK(o.server == "/bin/true");
  CHECK(o.server_args == std::vector<std::string>{"--threads=3", "--slice-us", "5"});
  CHECK(loadgen::server_threads(o) == 3);
  CHECK(o.points == std::vector<double>{10, 50.5, 100});
  CHECK(o.duration_s == 0.25);
  CHECK(o.rounds == 5);
  CHECK(o.bulk == loadgen::bulk_command::keys);
  CHECK(o.keys_pattern == "user:*");
  CHECK(o.control_rate == 250);
  REQUIRE(o.targets.size() == 1);
  CHECK(o.targets[0].name == "redis");
  CHECK(o.targets[0].host == "localhost");
  CHECK(o.targets[0].port == 6379);
  CHECK(o.server_cpus == std::vector<int>{0, 1, 3});
  CHECK(o.modes == std::vector<std::string>{"asio"});

  loadgen::options t = loadgen::parse_options(args({"--server=x", "--server-args", "--threads 2"}));
  CHECK(loadgen::server_threads(t) == 2);
  // An hour of samples per point over all rounds is allowed, exactly.
  CHECK(loadgen::parse_options(args({"--rounds=2", "--duration=1800"})).rounds == 2);
}

TEST_CASE("options: the client busy-polls by default only with CPUs apart from the servers'") {
  const auto spin = [](std::initializer_list<const char*> a) {
    return loadgen::client_spin_us(loadgen::parse_options(args(a)));
  };
  CHECK(spin({}) == 0);  // nothing pinned: spinning could take a server's CPU
  CHECK(spin({"--server=x", "--server-cpus=0", "--client-cpus=1"}) == loadgen::spin_always);
  CHECK(spin({"--server=x", "--server-cpus=0-1", "--client-cpus=2-3"}) == loadgen::spin_always);
  CHECK(spin({"--server=x", "--server-cpus=0-1", "--client-cpus=1-2"}) == 0);  // CPU 1 shared
  CHECK(spin({"--server=x", "--server-cpus=0"}) == 0);  // the client may run on CPU 0
  CHECK(spin({"--client-cpus=1"}) == 0);                // the servers' CPUs unknown
  // Given, --spin-us wins either way; auto is the default's own name.
  CHECK(spin({"--server=x", "--server-cpus=0", "--client-cpus=1", "--spin-us=0"}) == 0);
  CHECK(spin({"--server=x", "--server-cpus=0", "--client-cpus=1", "--spin-us=200"}) == 200);
  CHECK(spin({"--spin-us=always"}) == loadgen::spin_always);
  CHECK(spin({"--spin-us=200", "--spin-us=auto"}) == 0);
  CHECK(spin({"--server=x", "--server-cpus=0", "--client-cpus=1", "--spin-us", "auto"}) ==
        loadgen::spin_always);
}

TEST_CASE("options: every bad value names the flag and the value") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--points=10,abc"}, "--points: \"10,abc\""},
      {{"--points=0"}, "--points: \"0\""},
      {{"--points=10,10"}, "--points: \"10,10\" names a point twice"},
      {{"--points=1001"}, "--points: \"1001\""},
      {{"--duration=0"}, "--duration: \"0\""},
      {{"--duration=fast"}, "--duration: \"fast\""},
      {{"--duration=nan"}, "--duration: \"nan\""},
      {{"--warmup=-1"}, "--warmup: \"-1\""},
      {{"--rounds=0"}, "--rounds: \"0\" is not an integer in 1..100"},
      {{"--rounds=101"}, "--rounds: \"101\""},
      {{"--rounds=two"}, "--rounds: \"two\""},
      // Every round's samples are kept: an hour of them per point at most,
      // whichever flag comes first.
      {{"--rounds=4", "--duration=901"},
       "--rounds: 4 rounds of --duration 901 s measure 3604 s per point"},
      {{"--duration=1800", "--rounds=3"}, "--rounds: 3 rounds of --duration 1800 s"},
      {{"--timeout=0"}, "--timeout: \"0\""},
      {{"--capacity=0"}, "--capacity: \"0\" is not a number in (0..1e+07]"},
      {{"--bulk=work:0"}, "--bulk: \"work:0\""},
      {{"--bulk=work:x"}, "--bulk: \"work:x\""},
      {{"--bulk=sleep:1"}, "--bulk: \"sleep:1\""},
      {{"--bulk=keys:"}, "--bulk: \"keys:\""},
      {{"--bulk-conns=0"}, "--bulk-conns: \"0\""},
      {{"--control-conns=2000"}, "--control-conns: \"2000\""},
      {{"--control-rate=0"}, "--control-rate: \"0\""},
      {{"--keys=-3"}, "--keys: \"-3\""},
      {{"--client-priority=100"}, "--client-priority: \"100\""},
      {{"--spin-us=-1"}, "--spin-us: \"-1\" is not auto, always or an integer in 0..10000000"},
      {{"--spin-us=10000001"}, "--spin-us: \"10000001\""},
      {{"--spin-us=never"}, "--spin-us: \"never\""},
      {{"--spin-us="}, "--spin-us: \"\""},
      {{"--target=redis"}, "--target: \"redis\" is not NAME=HOST:PORT"},
      {{"--target=a b=h:1"}, "--target: \"a b=h:1\""},
      {{"--target=r=h:0"}, "--target: \"0\""},
      {{"--target=r=:5"}, "--target: \"r=:5\" has no HOST"},
      {{"--server-cpus=3-1", "--server=x"}, "--server-cpus: \"3-1\""},
      {{"--client-cpus=a"}, "--client-cpus: \"a\""},
      {{"--modes=urt,tbb", "--server=x"}, "--modes: \"urt,tbb\""},
      {{"--server", "x", "--server-args=--port=5"}, "--server-args: \"--port=5\" sets --port"},
      {{"--server-args=--threads=2"}, "--server-args: only with --server"},
      {{"--frobnicate=1"}, "unknown option --frobnicate"},
      {{"--duration"}, "--duration: a value is missing"},
      {{"stray"}, "unexpected argument \"stray\""},
  };
  for (const auto& [a, want] : cases) {
    const std::string got = usage_message(a);
    CAPTURE(got);
    CHECK(got.find(want) != std::string::npos);
  }
}

TEST_CASE("ns_of: rounds, and saturates where a rate near 0 would overflow") {
  using std::chrono::nanoseconds;
  CHECK(loadgen::ns_of(1.5) == nanoseconds(1'500'000'000));
  CHECK(loadgen::ns_of(1e-9) == nanoseconds(1));
  CHECK(loadgen::ns_of(0.4e-9) == nanoseconds(0));
  CHECK(loadgen::ns_of(0) == nanoseconds(0));
  CHECK(loadgen::ns_of(-3) == nanoseconds(0));
  CHECK(loadgen::ns_of(std::nan("")) == nanoseconds(0));
  const nanoseconds day = std::chrono::hours(24);
  CHECK(loadgen::ns_of(86'399.5) < day);
  // The smallest rates the flags accept: 1 / --control-rate and
  // connections / (--capacity x the smallest --points).
  CHECK(loadgen::ns_of(1.0 / 1e-300) == day);
  CHECK(loadgen::ns_of(1024 / (1e-300 * 1e-300)) == day);  // +inf
  CHECK(loadgen::ns_of(1e30) == day);
}

TEST_CASE("options: the baseline runs first") {
  loadgen::options o = loadgen::parse_options(args({"--server=x"}));
  std::vector<loadgen::target> order = loadgen::resolve_targets(o);
  REQUIRE(order.size() == 2);
  CHECK(o.baseline == "asio");
  CHECK(order[0].name == "asio");
  CHECK(order[1].name == "urt");

  o = loadgen::parse_options(args({"--target=a=h:1", "--target=b=h:2", "--baseline=b"}));
  order = loadgen::resolve_targets(o);
  CHECK(order[0].name == "b");
  o = loadgen::parse_options(args({"--target=a=h:1", "--target=b=h:2"}));
  order = loadgen::resolve_targets(o);
  CHECK(o.baseline == "a");

  o = loadgen::parse_options(args({"--target=a=h:1", "--baseline=c"}));
  CHECK_THROWS_WITH_AS((void)loadgen::resolve_targets(o), doctest::Contains("--baseline: \"c\""),
                       loadgen::usage_error);
  o = loadgen::parse_options(args({"--server=x", "--target=urt=h:1"}));
  CHECK_THROWS_AS((void)loadgen::resolve_targets(o), loadgen::usage_error);
  o = loadgen::parse_options({});
  CHECK_THROWS_WITH_AS((void)loadgen::resolve_targets(o), doctest::Contains("nothing to measure"),
                       loadgen::usage_error);
}

TEST_CASE("percentiles: exact nearest rank") {
  std::vector<std::int64_t> v;
  for (int i = 1000; i >= 1; --i) v.push_back(i * 1000);  // 1..1000 us, reversed
  const loadgen::latency_summary s = loadgen::summarize(v);
  CHECK(s.samples == 1000);
  CHECK(s.p50 == 500.0);
  CHECK(s.p99 == 990.0);
  CHECK(s.p999 == 999.0);
  CHECK(s.max == 1000.0);
  std::vector<std::int64_t> one{7000};
  CHECK(loadgen::summarize(one).p999 == 7.0);
  std::vector<std::int64_t> none;
  CHECK(loadgen::summarize(none).samples == 0);
}

TEST_CASE("report: table rows, ratios and the SVG's series") {
  loadgen::run_result r;
  r.bulk_label = "WORK 200";
  r.bulk_conns = 4;
  r.control_conns = 4;
  r.control_rate = 1000;
  r.duration_s = 2;
  r.warmup_s = 0.5;
  r.capacity_s = 1;
  r.capacity = 8000;
  r.baseline = "asio";
  r.percents = {50, 100};
  for (const char* name : {"urt", "asio"}) {
    loadgen::server_result s;
    s.name = name;
    s.mode = name;
    for (const double p : r.percents) {
      loadgen::point_result pr;
      pr.ran = true;
      pr.percent = p;
      pr.offered = r.capacity * p / 100;
      pr.bulk_rate = pr.offered;
      pr.control.samples = 100;
      pr.control.p99 = std::string(name) == "urt" ? 20 : 400;
      s.points.push_back(pr);
    }
    r.servers.push_back(s);
  }
  r.servers[0].points[1].ran = false;
  r.servers[0].failure = "boom";
  const std::string table = loadgen::format_table(r);
  CHECK(table.find("p99/asio") != std::string::npos);
  CHECK(table.find("0.05") != std::string::npos);   // 20 / 400
  CHECK(table.find("not run: boom") != std::string::npos);
  const std::string svg = loadgen::format_svg(r);
  CHECK(svg.find("data-server=\"urt\"") != std::string::npos);
  CHECK(svg.find("data-server=\"asio\"") != std::string::npos);
  CHECK(svg.rfind("</svg>\n") == svg.size() - 7);
  const std::string json = loadgen::format_json(r);
  CHECK(json.find("\"failure\": \"boom\"") != std::string::npos);
  CHECK(json.find("\"rounds\": 1,") != std::string::npos);
  CHECK(json.find("\"control_p99_us_by_round\": []") != std::string::npos);
  // Rounds: said above the table, each round's p99 in the JSON.
  CHECK(table.find("rounds, the servers in turn") == std::string::npos);
  r.rounds = 2;
  r.servers[1].points[0].round_p99 = {380, 420};
  CHECK(loadgen::format_table(r).find("2 rounds, the servers in turn") != std::string::npos);
  CHECK(loadgen::format_json(r).find("\"control_p99_us_by_round\": [380, 420]") !=
        std::string::npos);
}

namespace {

// A two-server result over `percents`; every point ran, with the given
// control p99 and bulk/s of urt and the baseline asio, lag p99 10 us.
loadgen::run_result two_servers(const std::vector<double>& percents, double urt_p99,
                                double urt_bulk, double asio_p99, double asio_bulk) {
  loadgen::run_result r;
  r.baseline = "asio";
  r.percents = percents;
  for (const char* name : {"urt", "asio"}) {
    const bool urt = std::string(name) == "urt";
    loadgen::server_result s;
    s.name = name;
    for (const double p : percents) {
      loadgen::point_result pr;
      pr.ran = true;
      pr.percent = p;
      pr.bulk_rate = urt ? urt_bulk : asio_bulk;
      pr.control.samples = 100;
      pr.control.p99 = urt ? urt_p99 : asio_p99;
      pr.lag.p99 = 10;
      s.points.push_back(pr);
    }
    r.servers.push_back(s);
  }
  return r;
}

}  // namespace

TEST_CASE("report: the target is judged at 100% and up, every such point within both bounds") {
  SUBCASE("met: p99 a tenth, bulk at 80%, below-saturation points not looked at") {
    loadgen::run_result r = two_servers({50, 100, 120}, 100, 800, 1000, 1000);
    r.servers[0].points[0].control.p99 = 5000;  // 50%: not judged
    const std::vector<loadgen::target_verdict> v = loadgen::judge_targets(r);
    REQUIRE(v.size() == 1);
    CHECK(v[0].server == "urt");
    REQUIRE(v[0].points.size() == 2);
    CHECK(v[0].points[0].percent == 100);
    CHECK(v[0].points[1].percent == 120);
    CHECK(v[0].met);
    const std::string table = loadgen::format_table(r);
    CHECK(table.find("urt: 100% p99 0.10x bulk 0.80x, 120% p99 0.10x bulk 0.80x  -> met") !=
          std::string::npos);
    CHECK(table.find("send lag") == std::string::npos);
    CHECK(loadgen::format_json(r).find("\"server\": \"urt\", \"met\": true") != std::string::npos);
  }
  SUBCASE("not met: one point's p99 above a tenth, or its bulk below 80%") {
    loadgen::run_result r = two_servers({100, 120}, 100, 900, 1000, 1000);
    r.servers[0].points[1].control.p99 = 101;
    CHECK_FALSE(loadgen::judge_targets(r)[0].met);
    loadgen::run_result low_bulk = two_servers({100, 120}, 50, 900, 1000, 1000);
    low_bulk.servers[0].points[0].bulk_rate = 799;
    CHECK_FALSE(loadgen::judge_targets(low_bulk)[0].met);
    CHECK(loadgen::format_table(low_bulk).find("-> NOT met") != std::string::npos);
    CHECK(loadgen::format_json(low_bulk).find("\"met\": false") != std::string::npos);
  }
  SUBCASE("a saturating point either server did not run is not met") {
    loadgen::run_result r = two_servers({100, 120}, 50, 900, 1000, 1000);
    r.servers[1].points[1].ran = false;
    const std::vector<loadgen::target_verdict> v = loadgen::judge_targets(r);
    CHECK_FALSE(v[0].points[1].ran);
    CHECK_FALSE(v[0].met);
    CHECK(loadgen::format_table(r).find("120% not run  -> NOT met") != std::string::npos);
  }
  SUBCASE("no saturating point: nothing to judge, not met") {
    const loadgen::run_result r = two_servers({10, 50}, 50, 900, 1000, 1000);
    const std::vector<loadgen::target_verdict> v = loadgen::judge_targets(r);
    REQUIRE(v.size() == 1);
    CHECK(v[0].points.empty());
    CHECK_FALSE(v[0].met);
    CHECK(loadgen::format_table(r).find("urt: no point at 100% or above: nothing to judge") !=
          std::string::npos);
  }
  SUBCASE("the client's own lag at half the control p99 or more is named") {
    loadgen::run_result r = two_servers({100, 120}, 50, 900, 1000, 1000);
    r.servers[0].points[1].lag.p99 = 25;  // half of 50
    const std::vector<loadgen::target_verdict> v = loadgen::judge_targets(r);
    CHECK_FALSE(v[0].points[0].client_bound);
    CHECK(v[0].points[1].client_bound);
    CHECK(loadgen::format_table(r).find("urt: at 120% the client's own send lag p99") !=
          std::string::npos);
    // A sleeping client is told how to keep its wake-ups out; one that
    // busy-polled already is not.
    CHECK(loadgen::format_table(r).find("--spin-us always") != std::string::npos);
    r.client_spun = true;
    CHECK(loadgen::format_table(r).find("--spin-us always") == std::string::npos);
    CHECK(loadgen::format_table(r).find("it never slept") != std::string::npos);
  }
  SUBCASE("no baseline in the results: no verdict") {
    loadgen::run_result r = two_servers({100}, 50, 900, 1000, 1000);
    r.baseline = "redis";
    CHECK(loadgen::judge_targets(r).empty());
    CHECK(loadgen::format_table(r).find("target (reported") == std::string::npos);
  }
}
