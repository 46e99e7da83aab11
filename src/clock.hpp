#ifndef REDLOCK_CLOCK_HPP
#define REDLOCK_CLOCK_HPP

// The library's one clock. Every time the library reads goes through lock_clock::now(), and every
// wait through a lock_timer, so that a build can run the unchanged library on a clock of its own
// (a simulation's virtual time). Which clock is chosen at build time: lock_clock_choice.hpp is
// found on the include path, the library's own (src/, std::chrono::steady_clock) unless a build
// puts a folder with its own before src/ (as test/clock/seam/ does).
//
// A clock put here must keep steady_clock's time_point and duration types: the public API reports
// times in them (lease::valid_until, the observer's durations), and a different clock behind the
// same types changes no signature. Its now() must never go back.
//
// The date, which only people are shown (since when a sentinel group has named its master), is
// read through lock_wall_now() alone, which the same header declares.

#include <boost/asio/basic_waitable_timer.hpp>

#include <chrono>
#include <lock_clock_choice.hpp>
#include <type_traits>

namespace redlock::detail {

static_assert(std::is_same_v<lock_clock::time_point, std::chrono::steady_clock::time_point>,
              "lock_clock must keep steady_clock's time_point type (see clock.hpp)");
static_assert(lock_clock::is_steady, "lock_clock must never go back");

// A timer of lock_clock: what every wait of the library is armed on.
using lock_timer = boost::asio::basic_waitable_timer<lock_clock>;

}  // namespace redlock::detail

#endif
