#ifndef REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP
#define REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP

// A clock that only moves when a test moves it, put into the library through its clock seam
// (src/clock.hpp: compiled with REDLOCK_CLOCK_HEADER naming this file).

#include <chrono>

namespace redlock::detail {

struct lock_clock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr bool is_steady = true;

  static time_point now() noexcept { return current(); }
  // Moves the clock forward by `by` (never back).
  static void advance(duration by) noexcept {
    if (by > duration::zero()) current() += by;
  }

 private:
  // Far from the epoch, so that "now minus a window" is never before it.
  static time_point& current() noexcept {
    static time_point at{std::chrono::hours(1000)};
    return at;
  }
};

}  // namespace redlock::detail

#endif
