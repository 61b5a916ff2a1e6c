// messages: how urt's error messages spell a bad option and a duration, in
// one place, so that every message names its field and value alike.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace urt::detail {

/// `text` as messages quote it: between double quotes, with every control
/// byte (below 0x20, and 0x7f) written as \xNN, so that a message stays
/// one line and a NUL byte cannot cut it short in what().
inline std::string quoted(std::string_view text, char quote = '"') {
  constexpr char hex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 0xf];
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

/// A duration as messages print it: "1500ns".
inline std::string ns_text(std::chrono::nanoseconds d) { return std::to_string(d.count()) + "ns"; }

/// Throws std::invalid_argument "runtime_options.<field>: <why>".
[[noreturn]] inline void bad_option(std::string_view field, const std::string& why) {
  throw std::invalid_argument("runtime_options." + std::string(field) + ": " + why);
}

}  // namespace urt::detail
