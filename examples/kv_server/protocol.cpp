#include "protocol.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

namespace kv {
namespace {

// A count line ($<len> or *<n>) is at most this long before its \r: an
// int64 has 20 characters; Redis allows more, but nothing valid needs it.
constexpr std::size_t max_count_line = 32;

// sdssplitargs skips blanks, and checks what follows a closing quote, with
// isspace(); an unquoted word ends only at a space, tab, CR or LF (\v and
// \f are part of it: ECHO a\vb answers "a\vb").
bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool ends_word(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A byte as an error message may quote it: itself, or \xHH.
std::string printable(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, c);
  static constexpr char digits[] = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return {'\\', 'x', digits[u >> 4], digits[u & 15]};
}

parse_result found(parse_status status, std::size_t consumed) {
  parse_result r;
  r.status = status;
  r.consumed = consumed;
  return r;
}

parse_result fatal_error(std::string message) {
  return {.status = parse_status::error, .consumed = 0, .fatal = true, .error = std::move(message)};
}

// A request over parse_limits::max_request (--max-request).
parse_result oversized_error(std::string message) {
  parse_result r = fatal_error(std::move(message));
  r.oversized = true;
  return r;
}

enum class line_status { ok, incomplete, too_long, bad_end };

// The count after the type byte at data[pos], ending in \r\n: its digits
// and where the next line starts.
line_status count_line(std::string_view data, std::size_t pos, std::string_view& digits,
                       std::size_t& next) noexcept {
  const std::size_t limit = std::min(data.size(), pos + 1 + max_count_line + 1);
  for (std::size_t i = pos + 1; i < limit; ++i) {
    if (data[i] != '\r') continue;
    if (i + 1 == data.size()) return line_status::incomplete;
    if (data[i + 1] != '\n') return line_status::bad_end;
    digits = data.substr(pos + 1, i - pos - 1);
    next = i + 2;
    return line_status::ok;
  }
  return limit == data.size() && data.size() < pos + 1 + max_count_line + 1 ? line_status::incomplete
                                                                         : line_status::too_long;
}

}  // namespace

bool parse_int64(std::string_view s, std::int64_t& v) noexcept {
  const std::string_view magnitude = !s.empty() && s.front() == '-' ? s.substr(1) : s;
  if (magnitude.empty() || (magnitude.front() == '0' && s.size() > 1) ||
      magnitude.front() < '0' || magnitude.front() > '9') {
    return false;  // string2ll: no sign but -, no leading zero, no -0
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc{} && end == s.data() + s.size();
}

bool equals_nocase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

void request_parser::forget_partial() noexcept {
  mb_count_ = 0;
  mb_next_ = 0;
  mb_words_.clear();
  inline_searched_ = 0;
  partial_seen_ = 0;
}

parse_result request_parser::parse(std::string_view data, std::vector<std::string_view>& args) {
  args.clear();
  // Progress kept from the last call is for a longer view of the same
  // request (see the class comment); a shorter one is another request.
  if (data.size() < partial_seen_) forget_partial();
  if (data.empty()) return {};
  parse_result r = data.front() == '*' ? parse_multibulk(data, args) : parse_inline(data, args);
  if (r.status == parse_status::incomplete) {
    partial_seen_ = data.size();
  } else {
    forget_partial();
  }
  if (r.status != parse_status::complete) args.clear();  // words of a partial request: none
  return r;
}

parse_result request_parser::parse_multibulk(std::string_view data,
                                             std::vector<std::string_view>& args) {
  std::string_view digits;
  std::size_t pos = 0;
  std::int64_t n = mb_count_;
  if (n == 0) {
    switch (count_line(data, 0, digits, pos)) {
      case line_status::incomplete: return {};
      case line_status::too_long: return fatal_error("Protocol error: too big mbulk count string");
      case line_status::bad_end: return fatal_error("Protocol error: invalid multibulk length");
      case line_status::ok: break;
    }
    if (!parse_int64(digits, n) || n > static_cast<std::int64_t>(limits_.max_args)) {
      return fatal_error("Protocol error: invalid multibulk length");
    }
    if (n <= 0) return found(parse_status::empty, pos);  // Redis skips *0 and *-1
    scanned_ += pos;
    mb_count_ = n;
    mb_next_ = pos;
  }
  // Resume after the words already whole.
  pos = mb_next_;
  for (auto i = static_cast<std::int64_t>(mb_words_.size()); i < n; ++i) {
    if (pos == data.size()) return {};
    if (data[pos] != '$') {
      return fatal_error("Protocol error: expected '$', got '" + printable(data[pos]) + "'");
    }
    std::size_t body = 0;
    switch (count_line(data, pos, digits, body)) {
      case line_status::incomplete: return {};
      case line_status::too_long: return fatal_error("Protocol error: too big bulk count string");
      case line_status::bad_end: return fatal_error("Protocol error: invalid bulk length");
      case line_status::ok: break;
    }
    std::int64_t len = 0;
    if (!parse_int64(digits, len) || len < 0) {
      return fatal_error("Protocol error: invalid bulk length");
    }
    // Redis answers a length over its limit "invalid bulk length"; naming
    // the limit tells the client's user what to change.
    if (static_cast<std::uint64_t>(len) > limits_.max_request) {
      return oversized_error("Protocol error: a bulk string of " + std::to_string(len) +
                             " bytes is over the server's limit of " +
                             std::to_string(limits_.max_request) + " bytes (--max-request)");
    }
    const std::size_t end = body + static_cast<std::size_t>(len);  // no overflow: len <= max_request
    if (end + 2 > limits_.max_request) {
      return oversized_error("Protocol error: request bigger than the server's limit of " +
                             std::to_string(limits_.max_request) + " bytes (--max-request)");
    }
    if (end + 2 > data.size()) return {};
    if (data[end] != '\r' || data[end + 1] != '\n') {
      return fatal_error("Protocol error: expected CRLF after a bulk string of " +
                         std::to_string(len) + " bytes");
    }
    mb_words_.emplace_back(body, static_cast<std::size_t>(len));
    scanned_ += end + 2 - pos;
    pos = end + 2;
    mb_next_ = pos;
  }
  args.reserve(mb_words_.size());
  for (const auto& [offset, length] : mb_words_) args.push_back(data.substr(offset, length));
  return found(parse_status::complete, pos);
}

parse_result request_parser::parse_inline(std::string_view data,
                                          std::vector<std::string_view>& args) {
  // Search only what the last call did not (the line's start is the same).
  const std::size_t from = std::min(inline_searched_, data.size());
  const std::size_t nl = data.find('\n', from);
  scanned_ += (nl == std::string_view::npos ? data.size() : nl + 1) - from;
  if (nl == std::string_view::npos || nl > limits_.max_inline) {
    if (data.size() > limits_.max_inline) return fatal_error("Protocol error: too big inline request");
    inline_searched_ = data.size();
    return {};
  }
  std::string_view line = data.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t consumed = nl + 1;

  // Redis's sdssplitargs rules (see protocol.hpp).
  words_.clear();
  ends_.clear();
  const auto unbalanced = [&] {
    args.clear();
    return parse_result{.status = parse_status::error, .consumed = consumed, .fatal = false,
                        .error = "Protocol error: unbalanced quotes in request"};
  };
  std::size_t p = 0;
  const auto at = [&](std::size_t i) { return i < line.size() ? line[i] : '\0'; };
  const auto ends_here = [&](std::size_t i) { return i >= line.size() || is_space(line[i]); };
  for (;;) {
    while (p < line.size() && is_space(line[p])) ++p;
    if (p >= line.size()) break;
    if (ends_.size() == limits_.max_args) {
      return {.status = parse_status::error, .consumed = consumed, .fatal = false,
              .error = "Protocol error: more than " + std::to_string(limits_.max_args) +
                       " arguments in an inline request"};
    }
    bool in_double = false;
    bool in_single = false;
    for (bool done = false; !done;) {
      const char c = at(p);
      if (in_double) {
        if (p >= line.size()) return unbalanced();
        if (c == '\\' && at(p + 1) == 'x' && p + 3 < line.size() && hex_value(at(p + 2)) >= 0 &&
            hex_value(at(p + 3)) >= 0) {
          words_ += static_cast<char>(hex_value(at(p + 2)) * 16 + hex_value(at(p + 3)));
          p += 3;
        } else if (c == '\\' && p + 1 < line.size()) {
          ++p;
          switch (line[p]) {
            case 'n': words_ += '\n'; break;
            case 'r': words_ += '\r'; break;
            case 't': words_ += '\t'; break;
            case 'b': words_ += '\b'; break;
            case 'a': words_ += '\a'; break;
            default: words_ += line[p]; break;
          }
        } else if (c == '"') {
          if (!ends_here(p + 1)) return unbalanced();  // "foo"bar
          done = true;
        } else {
          words_ += c;
        }
      } else if (in_single) {
        if (p >= line.size()) return unbalanced();
        if (c == '\\' && at(p + 1) == '\'') {
          ++p;
          words_ += '\'';
        } else if (c == '\'') {
          if (!ends_here(p + 1)) return unbalanced();
          done = true;
        } else {
          words_ += c;
        }
      } else if (p >= line.size() || ends_word(c)) {
        done = true;
      } else if (c == '"') {
        in_double = true;
      } else if (c == '\'') {
        in_single = true;
      } else {
        words_ += c;
      }
      if (p < line.size()) ++p;
    }
    ends_.push_back(words_.size());
  }
  if (ends_.empty()) return found(parse_status::empty, consumed);
  std::size_t begin = 0;
  for (const std::size_t end : ends_) {
    args.push_back(std::string_view(words_).substr(begin, end - begin));
    begin = end;
  }
  return found(parse_status::complete, consumed);
}

void reply_simple(std::string& out, std::string_view s) {
  out += '+';
  out += s;
  out += "\r\n";
}

void reply_error(std::string& out, std::string_view s) {
  out += '-';
  // A simple string cannot hold CR or LF: an error text never does, but a
  // message quoting the client's bytes might.
  for (const char c : s) out += (c == '\r' || c == '\n') ? ' ' : c;
  out += "\r\n";
}

void reply_integer(std::string& out, std::int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  static_cast<void>(ec);  // 24 bytes hold every int64
  out += ':';
  out.append(buf, end);
  out += "\r\n";
}

void reply_bulk(std::string& out, std::string_view s) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, s.size());
  static_cast<void>(ec);
  out += '$';
  out.append(buf, end);
  out += "\r\n";
  out += s;
  out += "\r\n";
}

void reply_null(std::string& out) { out += "$-1\r\n"; }

void reply_array_header(std::string& out, std::size_t n) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  static_cast<void>(ec);
  out += '*';
  out.append(buf, end);
  out += "\r\n";
}

}  // namespace kv
