#ifndef REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP
#define REDLOCK_TEST_CLOCK_VIRTUAL_CLOCK_HPP

// A clock that only moves when a test moves it, put into the library through its clock seam
// (src/clock.hpp: chosen through test/clock/seam/lock_clock_choice.hpp, and by the simulation's
// test/sim/seam/lock_clock_choice.hpp, whose scheduler moves it from one event to the next).

#include <chrono>

namespace redlock::detail {

struct lock_clock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr bool is_steady = true;

  static time_point now() noexcept { return current(); }
  // Moves the clock forward by `by`, or to `at` (never back).
  static void advance(duration by) noexcept {
    if (by > duration::zero()) current() += by;
  }
  static void advance_to(time_point at) noexcept {
    if (at > current()) current() = at;
  }
  // Back to the first instant, for a new run of a simulation (no object of the previous run may
  // be left, which would see time go back).
  static void start_run() noexcept { current() = epoch(); }
  // Far from steady_clock's zero, so that "now minus a window" is never before it.
  static time_point epoch() noexcept { return time_point{std::chrono::hours(1000)}; }

 private:
  static time_point& current() noexcept {
    static time_point at = epoch();
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
