// libFuzzer target: urt-kv's request parser (examples/kv_server/protocol.hpp)
// driven as the server drives it, and its KEYS glob matcher.
// Input: the first byte picks the limits (max_request 64..16384, max_args,
// max_inline), the rest is a byte stream a client might send. The stream
// is fed in growing prefixes (as reads deliver it) and parsed request by
// request until it is used up or a fatal error ends the connection.
// Checks: a result never claims more bytes than it was given; every
// complete, empty or non-fatal error result consumes at least one byte
// (the server's loop always progresses); a complete request has 1 to
// max_args words, each within max_request bytes; an incomplete stream
// never needs more than max_request buffered bytes before the parser
// decides; an error always has a message; a parse resumed across reads
// gives what a fresh parser gives on the same bytes. Then glob_match on the input
// split in two (pattern, key) must finish (it has no recursion) and agree
// with itself.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "glob.hpp"
#include "protocol.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_resp: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t knob = data[0];
  const std::size_t max_request = std::size_t{64} << (knob & 7);
  // As the server sets them: an inline line is never longer than a request.
  const kv::parse_limits limits{.max_request = max_request,
                                .max_args = std::size_t{1} + ((knob >> 3) & 7) * 4,
                                .max_inline = std::min(max_request, std::size_t{32} << ((knob >> 6) & 3))};
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  kv::request_parser parser(limits);
  std::vector<std::string_view> args;
  std::size_t begin = 0;
  // Reads of 1, 2, 4, ... bytes: the same stream split many ways.
  std::size_t received = 0;
  for (std::size_t chunk = 1; begin < stream.size();) {
    received = std::min(stream.size(), received + chunk);
    chunk *= 2;
    for (;;) {
      const std::string_view pending = stream.substr(begin, received - begin);
      const kv::parse_result r = parser.parse(pending, args);
      if (r.consumed > pending.size()) fail("consumed more than it was given");
      // Resuming a request begun in earlier reads decides as a parser that
      // sees all of it at once.
      kv::request_parser fresh(limits);
      std::vector<std::string_view> fresh_args;
      const kv::parse_result f = fresh.parse(pending, fresh_args);
      if (f.status != r.status || f.consumed != r.consumed || f.fatal != r.fatal ||
          f.error != r.error || fresh_args != args) {
        fail("a resumed parse differs from a fresh one");
      }
      if (r.status == kv::parse_status::incomplete) {
        if (!args.empty()) fail("incomplete with words");
        if (pending.size() > limits.max_request + 64 && received == stream.size()) {
          // All bytes are in and still undecided beyond the limit.
          fail("undecided past max_request");
        }
        break;
      }
      if (r.status == kv::parse_status::error) {
        if (r.error.empty()) fail("an error without a message");
        if (r.fatal) return 0;  // the server closes the connection
      }
      if (r.consumed == 0) fail("no progress");
      if (r.status == kv::parse_status::complete) {
        if (args.empty() || args.size() > limits.max_args) fail("word count outside 1..max_args");
        for (const std::string_view w : args) {
          if (w.size() > limits.max_request) fail("a word over max_request");
        }
      }
      begin += r.consumed;
      if (begin == received) break;
    }
    if (received == stream.size() && begin < stream.size()) {
      // The rest is an incomplete request: the connection would wait for
      // more (or the idle timeout).
      break;
    }
  }
  const std::size_t cut = stream.find('\0');
  const std::string_view pattern = stream.substr(0, cut);
  const std::string_view key = cut == std::string_view::npos ? std::string_view{} : stream.substr(cut + 1);
  if (kv::glob_match(pattern, key) != kv::glob_match(pattern, key)) fail("glob is not deterministic");
  if (!kv::glob_match("*", key)) fail("* does not match every key");
  return 0;
}
