// glob: Redis's KEYS pattern language, matched without recursion.
//
//   *        any run of bytes (also none)
//   ?        any one byte
//   [abc]    one of a, b, c;  [^abc] one byte that is none of them
//   [a-z]    a range (either order); ranges and single bytes mix: [a-cx]
//   \c       the byte c itself (also inside [...])
//
// A [ without its ] takes the rest of the pattern as its class, as Redis
// does. Matching is backtracking over the last * only (each other element
// matches exactly one byte), so it takes at most pattern x key steps,
// never exponential time, whatever the pattern.
#pragma once

#include <string_view>

namespace kv {

[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view key) noexcept;

}  // namespace kv
