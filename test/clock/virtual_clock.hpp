#ifndef REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP
#define REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP

// A clock that only moves when a test moves it, put into the library through its clock seam
// (src/clock.hpp: chosen through test/clock/seam/lock_clock_choice.hpp).

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

// The date moves with the virtual clock.
inline std::chrono::system_clock::time_point lock_wall_now() noexcept {
  return std::chrono::system_clock::time_point{} +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             lock_clock::now().time_since_epoch());
}

}  // namespace redlock::detail

#endif
