#ifndef REDLOCK_CLOCK_HPP
#define REDLOCK_CLOCK_HPP

// The library's one clock. Every time the library reads goes through lock_clock::now(), and every
// wait through a lock_timer, so that a build can run the unchanged library on a clock of its own
// (a simulation's virtual time). Which clock and timer are chosen at build time:
// lock_clock_choice.hpp is found on the include path, the library's own (src/: steady_clock and
// Asio's timer of it) unless a build puts a folder with its own before src/ (as test/clock/seam/
// and test/sim/seam/ do).
//
// lock_timer is Asio's basic_waitable_timer of lock_clock, or a class that does for the library
// what it does: made from an executor (and optionally an expiry duration); expires_at,
// expires_after and cancel; async_wait with any completion token, completing void(error_code) with
// operation_aborted once cancelled (also through the handler's cancellation slot), on the handler's
// associated executor.
//
// A clock put here must keep steady_clock's time_point and duration types: the public API reports
// times in them (lease::valid_until, the observer's durations), and a different clock behind the
// same types changes no signature. Its now() must never go back.
//
// The date, which only people are shown (since when a sentinel group has named its master), is
// read through lock_wall_now() alone, which the same header declares.

#include <chrono>
#include <lock_clock_choice.hpp>
#include <type_traits>

namespace redlock::detail {

static_assert(std::is_same_v<lock_clock::time_point, std::chrono::steady_clock::time_point>,
              "lock_clock must keep steady_clock's time_point type (see clock.hpp)");
static_assert(lock_clock::is_steady, "lock_clock must never go back");

}  // namespace redlock::detail

#endif
