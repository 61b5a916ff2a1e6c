// libFuzzer target: the cpulist parser (urt::parse_cpulist, worker_set::parse).
// Input: the first byte picks the limit (the default 2^20, max_workers - 1,
// UINT_MAX for texts that cannot name a huge range, or a small one), the
// rest is the cpulist text. Checks: a parse either throws
// std::invalid_argument naming the field and quoting the text, or returns
// sorted distinct indexes within the limit that format_cpulist() writes
// back into a cpulist parsing to the same indexes.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "urt/worker_set.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz_cpulist: %s for \"%.*s\"\n", what, static_cast<int>(text.size()),
               text.data());
  std::abort();
}

// True when `text` cannot produce more than a few million indexes under
// limit UINT_MAX: no range at all, so at most one index per character.
bool no_range(std::string_view text) { return text.find('-') == std::string_view::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  unsigned limit = 1u << 20;
  switch (mode % 4) {
    case 0:
      break;
    case 1:
      limit = static_cast<unsigned>(urt::max_workers - 1);
      break;
    case 2:
      // The full unsigned range: only texts of single indexes, so that the
      // result (not the parser) stays small.
      if (no_range(text)) limit = UINT_MAX;
      break;
    default:
      limit = mode / 4;  // 0..63
      break;
  }
  std::vector<unsigned> ids;
  try {
    ids = urt::parse_cpulist(text, "fuzz", limit);
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    if (message.rfind("fuzz: \"", 0) != 0) fail("message does not name the field", text);
    // Whole (a NUL in the text cannot cut what() short) and on one line.
    if (message.find(" is not a cpulist (") == std::string::npos ||
        !message.ends_with("); expected e.g. \"0-3,8\"")) {
      fail("message has no reason", text);
    }
    if (message.find('\n') != std::string::npos) fail("a message of several lines", text);
    return 0;
  }
  if (ids.empty()) fail("a parse succeeded with no index", text);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] > limit) fail("an index above the limit", text);
    if (i > 0 && ids[i] <= ids[i - 1]) fail("indexes not sorted and distinct", text);
  }
  const std::string formatted = urt::format_cpulist(ids);
  if (urt::parse_cpulist(formatted, "fuzz", limit) != ids) fail("format/parse round trip", text);
  if (limit >= urt::max_workers - 1) {
    // The same text as a worker_set: accepted exactly when every index fits.
    try {
      const urt::worker_set set = urt::worker_set::parse(text, "fuzz");
      if (set.ids() != ids) fail("worker_set::parse differs", text);
    } catch (const std::invalid_argument&) {
      if (ids.back() < urt::max_workers) fail("worker_set::parse rejected a valid set", text);
    }
  }
  return 0;
}
