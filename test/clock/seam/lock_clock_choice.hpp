#ifndef REDLOCK_TEST_CLOCK_SEAM_LOCK_CLOCK_CHOICE_HPP
#define REDLOCK_TEST_CLOCK_SEAM_LOCK_CLOCK_CHOICE_HPP

// The clock seam's choice for builds that put this folder on the include path before src/: the
// virtual clock, and Asio's timer of it (see src/clock.hpp).

#include "clock/virtual_clock.hpp"

#include <boost/asio/basic_waitable_timer.hpp>

namespace redlock::detail {

using lock_timer = boost::asio::basic_waitable_timer<lock_clock>;

}  // namespace redlock::detail

#endif
