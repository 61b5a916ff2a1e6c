// urt/priority.hpp: task priorities, SCHED_FIFO style.
#pragma once

#include <cstdint>

namespace urt {

/// A task priority. 0 is the normal (background) class; 1..99 are FIFO
/// levels, higher is more urgent, exactly as in SCHED_FIFO. A worker always
/// runs its most urgent queued task next, first in first out within a level.
using priority_t = int;

inline constexpr priority_t priority_normal = 0;  ///< the background class
inline constexpr priority_t priority_min_fifo = 1;
inline constexpr priority_t priority_max = 99;
inline constexpr int priority_levels = priority_max + 1;  ///< levels 0..99

/// The scheduling class of a priority level.
enum class priority_class : std::uint8_t { normal, fifo };

/// True when `p` is a valid task priority (0..99).
[[nodiscard]] constexpr bool is_valid_priority(priority_t p) noexcept {
  return p >= priority_normal && p <= priority_max;
}

/// The class a valid priority belongs to.
[[nodiscard]] constexpr priority_class class_of(priority_t p) noexcept {
  return p == priority_normal ? priority_class::normal : priority_class::fifo;
}

}  // namespace urt
