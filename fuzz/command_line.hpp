// What the command-line fuzz targets (fuzz_*_cli.cpp) share: the input
// split at NUL bytes into arguments, and the abort that reports a broken
// check with the arguments that broke it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace urt_fuzz {

/// `args` followed by the input's NUL-separated arguments (none for an
/// empty input; a trailing NUL ends an empty last argument).
inline std::vector<std::string> split_args(const std::uint8_t* data, std::size_t size,
                                           std::vector<std::string> args = {}) {
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (size > 0) args.push_back(current);
  return args;
}

/// Prints "<target>: <what> for: 'arg' ..." and aborts (a libFuzzer crash).
[[noreturn]] inline void fail(const char* target, const char* what,
                              const std::vector<std::string>& args) {
  std::fprintf(stderr, "%s: %s for:", target, what);
  for (const auto& a : args) std::fprintf(stderr, " '%s'", a.c_str());
  std::fprintf(stderr, "\n");
  std::abort();
}

}  // namespace urt_fuzz
