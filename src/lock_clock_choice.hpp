#ifndef REDLOCK_LOCK_CLOCK_CHOICE_HPP
#define REDLOCK_LOCK_CLOCK_CHOICE_HPP

// The library's clock as built by default (see clock.hpp): the steady clock and Asio's timer of
// it, and the system clock for dates.

#include <boost/asio/basic_waitable_timer.hpp>

#include <chrono>

namespace redlock::detail {

using lock_clock = std::chrono::steady_clock;
// What every wait of the library is armed on.
using lock_timer = boost::asio::basic_waitable_timer<lock_clock>;

inline std::chrono::system_clock::time_point lock_wall_now() noexcept {
  return std::chrono::system_clock::now();
}

}  // namespace redlock::detail

#endif
