#ifndef REDLOCK_LOCK_CLOCK_CHOICE_HPP
#define REDLOCK_LOCK_CLOCK_CHOICE_HPP

// The library's clock as built by default (see clock.hpp): the steady clock, and the system clock
// for dates.

#include <chrono>

namespace redlock::detail {

using lock_clock = std::chrono::steady_clock;

inline std::chrono::system_clock::time_point lock_wall_now() noexcept {
  return std::chrono::system_clock::now();
}

}  // namespace redlock::detail

#endif
