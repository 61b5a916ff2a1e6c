// resp: an incremental parser of RESP2 replies, the client side of
// urt-kv's protocol (and Redis's). Bytes are fed as they arrive, split
// anywhere; every complete top-level reply is handed to a callback, in
// order. Nothing of a reply is kept but its type, whether it or an element
// nested in it is an error, and the text of a top-level simple string or
// error (enough to check "+PONG", "+OK" and to name an error); bulk payloads
// are skipped as they stream past, so a KEYS reply of any size costs no
// memory and no re-parsing.
//
//   +text\r\n   -text\r\n   :integer\r\n
//   $len\r\n<len bytes>\r\n   $-1\r\n (null)
//   *count\r\n<count replies>  *-1\r\n (null)
//
// Anything else (an unknown type byte, a line not ended by CRLF, a length
// that is not an integer, a bulk payload not followed by CRLF, nesting
// deeper than max_depth, a header line longer than max_line) is a protocol
// error: feed() returns false and error() says what it was; the stream
// cannot be resynchronised after that.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loadgen::resp {

/// One complete top-level reply.
struct reply {
  char type = 0;        ///< '+', '-', ':', '$' or '*'
  bool error = false;   ///< a '-' reply, or an array with a '-' element anywhere
  bool null = false;    ///< $-1 or *-1
  std::string_view text;  ///< '+' and '-': the line (at most max_text bytes); valid during the callback
};

class reply_parser {
 public:
  static constexpr std::size_t max_line = 64 * 1024;
  static constexpr std::size_t max_text = 256;
  static constexpr std::size_t max_depth = 32;
  static constexpr std::int64_t max_bulk = std::int64_t{512} * 1024 * 1024;

  /// Parses `data`, calling on_reply(const reply&) for each reply it
  /// completes. False on a protocol error (see error()); every later call
  /// then returns false too.
  template <class OnReply>
  bool feed(std::string_view data, OnReply&& on_reply) {
    if (!error_.empty()) return false;
    std::size_t i = 0;
    while (i < data.size()) {
      if (bulk_left_ > 0) {  // a bulk string's payload: skip it
        const std::size_t take =
            std::min<std::size_t>(data.size() - i, static_cast<std::size_t>(bulk_left_));
        bulk_left_ -= static_cast<std::int64_t>(take);
        i += take;
        if (bulk_left_ == 0) crlf_left_ = 2;
        continue;
      }
      if (crlf_left_ > 0) {  // the CRLF after a payload
        const char want = crlf_left_ == 2 ? '\r' : '\n';
        if (data[i] != want) return fail("a bulk string's payload is not followed by CRLF");
        ++i;
        if (--crlf_left_ == 0 && !element(false, on_reply)) return false;
        continue;
      }
      const std::size_t nl = data.find('\n', i);
      const std::size_t end = nl == std::string_view::npos ? data.size() : nl + 1;
      if (line_.size() + (end - i) > max_line) return fail("a reply line longer than 64 KiB");
      line_.append(data.substr(i, end - i));
      i = end;
      if (nl == std::string_view::npos) break;  // the rest of the line comes later
      if (!header(on_reply)) return false;
      line_.clear();
    }
    return true;
  }

  /// True between replies: no partial reply is buffered.
  [[nodiscard]] bool idle() const noexcept {
    return line_.empty() && stack_.empty() && bulk_left_ == 0 && crlf_left_ == 0;
  }

  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  bool fail(std::string what) {
    error_ = std::move(what);
    return false;
  }

  static bool integer(std::string_view s, std::int64_t& v) {
    if (s.empty()) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && p == s.data() + s.size();
  }

  // line_ holds one whole line, CRLF included.
  template <class OnReply>
  bool header(OnReply& on_reply) {
    if (line_.size() < 3 || line_[line_.size() - 2] != '\r') {
      return fail(line_.size() < 3 ? "an empty reply line" : "a reply line not ended by CRLF");
    }
    const char type = line_[0];
    const std::string_view body = std::string_view(line_).substr(1, line_.size() - 3);
    const bool top = stack_.empty();
    if (top) {
      top_ = reply{};
      top_.type = type;
    }
    std::int64_t n = 0;
    switch (type) {
      case '+':
      case '-':
        if (top) {
          text_.assign(body.substr(0, max_text));
          top_.text = text_;
        }
        return element(type == '-', on_reply);
      case ':':
        if (!integer(body, n)) return fail("an integer reply that is not an integer");
        return element(false, on_reply);
      case '$':
        if (!integer(body, n) || n < -1 || n > max_bulk) return fail("a bad bulk string length");
        if (n == -1) {
          if (top) top_.null = true;
          return element(false, on_reply);
        }
        bulk_left_ = n;
        if (n == 0) crlf_left_ = 2;
        return true;
      case '*':
        if (!integer(body, n) || n < -1) return fail("a bad array length");
        if (n <= 0) {
          if (top) top_.null = n == -1;
          return element(false, on_reply);
        }
        if (stack_.size() == max_depth) return fail("arrays nested deeper than 32");
        stack_.push_back(n);
        return true;
      default:
        return fail(std::string("an unknown reply type byte 0x") + "0123456789abcdef"[(type >> 4) & 15] +
                    "0123456789abcdef"[type & 15]);
    }
  }

  // One element (a scalar, or a whole array) is complete.
  template <class OnReply>
  bool element(bool is_error, OnReply& on_reply) {
    top_.error = top_.error || is_error;
    while (!stack_.empty()) {
      if (--stack_.back() > 0) return true;
      stack_.pop_back();  // that array is complete: an element of its parent
    }
    on_reply(static_cast<const reply&>(top_));
    return true;
  }

  std::string line_;
  std::string text_;
  std::vector<std::int64_t> stack_;  // elements still to come, per open array
  std::int64_t bulk_left_ = 0;       // payload bytes still to skip
  int crlf_left_ = 0;                // bytes of the payload's CRLF still to check
  reply top_;
  std::string error_;
};

}  // namespace loadgen::resp
