// messages: how urt's error messages spell a bad option and a duration, in
// one place, so that every message names its field and value alike.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace urt::detail {

/// A duration as messages print it: "1500ns".
inline std::string ns_text(std::chrono::nanoseconds d) { return std::to_string(d.count()) + "ns"; }

/// Throws std::invalid_argument "runtime_options.<field>: <why>".
[[noreturn]] inline void bad_option(std::string_view field, const std::string& why) {
  throw std::invalid_argument("runtime_options." + std::string(field) + ": " + why);
}

}  // namespace urt::detail
