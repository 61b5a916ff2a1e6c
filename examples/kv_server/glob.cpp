#include "glob.hpp"

#include <cstddef>
#include <utility>

namespace kv {
namespace {

// Whether the element of `pattern` at `p` (not a *) matches byte `c`; sets
// `next` to the element after it.
bool element_matches(std::string_view pattern, std::size_t p, unsigned char c,
                     std::size_t& next) noexcept {
  const std::size_t n = pattern.size();
  switch (pattern[p]) {
    case '?':
      next = p + 1;
      return true;
    case '\\':
      if (p + 1 < n) {
        next = p + 2;
        return static_cast<unsigned char>(pattern[p + 1]) == c;
      }
      next = p + 1;
      return c == '\\';
    case '[': {
      std::size_t i = p + 1;
      const bool negate = i < n && pattern[i] == '^';
      if (negate) ++i;
      bool found = false;
      while (i < n && pattern[i] != ']') {
        if (pattern[i] == '\\' && i + 1 < n) {
          found |= static_cast<unsigned char>(pattern[i + 1]) == c;
          i += 2;
        } else if (i + 2 < n && pattern[i + 1] == '-') {
          // As Redis: the end may be ], and the bounds compare as signed
          // chars (glob.hpp).
          auto lo = static_cast<signed char>(pattern[i]);
          auto hi = static_cast<signed char>(pattern[i + 2]);
          if (lo > hi) std::swap(lo, hi);
          const auto sc = static_cast<signed char>(c);
          found |= sc >= lo && sc <= hi;
          i += 3;
        } else {
          found |= static_cast<unsigned char>(pattern[i]) == c;
          ++i;
        }
      }
      next = i < n ? i + 1 : n;  // past the ], or the end of an unclosed class
      return found != negate;
    }
    default:
      next = p + 1;
      return static_cast<unsigned char>(pattern[p]) == c;
  }
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view key) noexcept {
  if (key.empty()) return pattern.empty() || pattern == "*";  // as Redis (glob.hpp)
  std::size_t p = 0;
  std::size_t k = 0;
  // After a *: where the pattern resumes, and the key byte the * would
  // swallow next if what follows fails.
  std::size_t star_p = std::string_view::npos;
  std::size_t star_k = 0;
  while (k < key.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      while (p < pattern.size() && pattern[p] == '*') ++p;
      if (p == pattern.size()) return true;  // a trailing * takes the rest
      star_p = p;
      star_k = k;
      continue;
    }
    std::size_t next = 0;
    if (p < pattern.size() && element_matches(pattern, p, static_cast<unsigned char>(key[k]), next)) {
      p = next;
      ++k;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;  // let the last * take one more byte
    k = ++star_k;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace kv
