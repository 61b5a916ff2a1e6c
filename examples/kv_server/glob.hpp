// glob: Redis's KEYS pattern language, matched without recursion.
//
//   *        any run of bytes (also none)
//   ?        any one byte
//   [abc]    one of a, b, c;  [^abc] one byte that is none of them
//   [a-z]    a range (either order); ranges and single bytes mix: [a-cx]
//   \c       the byte c itself (also inside [...])
//
// Where Redis's matcher (stringmatchlen, util.c, Redis 7) has quirks, this
// one has them too, so that KEYS answers as redis-server does:
//   - a [ without its ] takes the rest of the pattern as its class;
//   - a range's end may be ]: [a-] is the range a..] (either order), and the
//     class goes on to the next ];
//   - range bounds compare as signed chars: [a-\xff] is \xff..a, which holds
//     no byte from \x80 to \xfe;
//   - an empty key matches only the patterns * and "" (KEYS * lists every
//     key; otherwise Redis matches an empty key only with an empty pattern,
//     so ** and ?* miss it).
// One difference is left: Redis gives up (no match) past 1000 nested *
// groups; this matcher does not recurse, and matches such patterns.
// Matching is backtracking over the last * only (each other element
// matches exactly one byte), so it takes at most pattern x key steps,
// never exponential time, whatever the pattern.
#pragma once

#include <string_view>

namespace kv {

[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view key) noexcept;

}  // namespace kv
