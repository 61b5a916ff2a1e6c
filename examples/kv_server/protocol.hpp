// protocol: the Redis serialization protocol (RESP2) as urt-kv reads and
// writes it. No I/O and no Asio here: the parser works on bytes already
// received, so the unit tests and the fuzz target drive it directly.
//
// Requests come in two forms, as Redis accepts them:
//   multibulk  *<n>\r\n then n times $<len>\r\n<len bytes>\r\n   (clients)
//   inline     a line of words ending in \n (\r\n too)            (nc, telnet)
// Inline words are split on spaces and tabs; "double quotes" take the
// escapes \n \r \t \b \a \\ \" \xHH, 'single quotes' only \'; a closing
// quote must be followed by a space or the end of the line.
//
// Errors, and what they do to the connection:
//   - a malformed multibulk header, or a request bigger than the limit:
//     the stream cannot be resynchronised (where the next request starts is
//     unknown), so the server replies -ERR Protocol error ... and closes, as
//     Redis does (parse_result::fatal);
//   - a malformed inline line (unbalanced quotes): the line ends at its \n,
//     so the server replies -ERR and goes on with the next line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kv {

/// What parse() found at the front of the buffer.
enum class parse_status {
  complete,    ///< one request: `args` holds its words, `consumed` its bytes
  empty,       ///< an empty request (*0, an empty line): skip `consumed` bytes
  incomplete,  ///< not a whole request yet: read more and call again
  error,       ///< malformed: reply `error`; close if `fatal`, else skip `consumed`
};

struct parse_result {
  parse_status status = parse_status::incomplete;
  std::size_t consumed = 0;
  bool fatal = false;
  std::string error;  ///< the whole error reply text, without "-" and CRLF
  bool oversized = false;  ///< an error because the request is over parse_limits::max_request
};

/// Limits of one request. Redis's own: 1M arguments, 512 MB per argument;
/// urt-kv's default request limit is far smaller (--max-request).
struct parse_limits {
  std::size_t max_request = 1 << 20;      ///< bytes of one request, framing included
  std::size_t max_args = 1024 * 1024;     ///< words of one request
  std::size_t max_inline = 64 * 1024;     ///< bytes of one inline line
};

/// Parses one request at a time from the front of a receive buffer. The
/// views it returns point into that buffer (multibulk) or into the parser's
/// own storage (inline words, unescaped): valid until the next parse() or
/// until the buffer changes. Single-threaded: one parser per connection.
///
/// An incomplete request is not parsed again from its start: the parser
/// keeps how far it got (the words of a multibulk request whole so far, as
/// offsets; how much of an inline line was searched for its end), so a
/// request that arrives in many small reads costs time linear in its size,
/// not quadratic (a 1 MB DEL sent 30 bytes at a time once cost 10 s of a
/// worker). So after an incomplete result the next call must be given the
/// same request from its first byte, with more bytes after it (the server's
/// receive buffer, which may have moved); anything shorter starts afresh.
class request_parser {
 public:
  explicit request_parser(parse_limits limits = {}) : limits_(limits) {}

  parse_result parse(std::string_view data, std::vector<std::string_view>& args);

  [[nodiscard]] const parse_limits& limits() const noexcept { return limits_; }
  /// Bytes looked at so far, over every call (a statistic for the tests:
  /// linear in the bytes received, however they were split).
  [[nodiscard]] std::uint64_t scanned() const noexcept { return scanned_; }

 private:
  parse_result parse_multibulk(std::string_view data, std::vector<std::string_view>& args);
  parse_result parse_inline(std::string_view data, std::vector<std::string_view>& args);

  void forget_partial() noexcept;

  parse_limits limits_;
  // A multibulk request not yet whole: its word count, where its next word
  // starts, and its whole words so far as (offset, length) from its start.
  std::int64_t mb_count_ = 0;  // 0: none in progress
  std::size_t mb_next_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> mb_words_;
  std::size_t inline_searched_ = 0;  // bytes of an unfinished inline line holding no newline
  std::size_t partial_seen_ = 0;     // bytes of the unfinished request the last call saw
  std::uint64_t scanned_ = 0;
  std::string words_;                 // unescaped inline words, back to back
  std::vector<std::size_t> ends_;     // where each inline word ends in words_
};

// --- replies ------------------------------------------------------------
// Each appends one RESP2 value to `out`.
void reply_simple(std::string& out, std::string_view s);          // +s
void reply_error(std::string& out, std::string_view s);           // -s
void reply_integer(std::string& out, std::int64_t v);             // :v
void reply_bulk(std::string& out, std::string_view s);            // $len s
void reply_null(std::string& out);                                // $-1
void reply_array_header(std::string& out, std::size_t n);         // *n

/// ASCII case-insensitive equality, for command names.
[[nodiscard]] bool equals_nocase(std::string_view a, std::string_view b) noexcept;

/// Parses a whole decimal int64 as Redis's string2ll does: an optional '-'
/// then digits, no leading zero (0 alone is the only one), no "-0",
/// nothing else; false when `s` is not one or it overflows. So "*01" and
/// "$04" are protocol errors, as redis-server answers them.
[[nodiscard]] bool parse_int64(std::string_view s, std::int64_t& v) noexcept;

}  // namespace kv
