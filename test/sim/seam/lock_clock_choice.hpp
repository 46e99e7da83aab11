#ifndef REDLOCK_TEST_SIM_SEAM_LOCK_CLOCK_CHOICE_HPP
#define REDLOCK_TEST_SIM_SEAM_LOCK_CLOCK_CHOICE_HPP

// The clock seam's choice for the simulation (src/clock.hpp): virtual time, moved by the
// simulation's scheduler, and timers that are events of its world.

#include "clock/virtual_clock.hpp"
#include "sim/runtime/sim_timer.hpp"

namespace redlock::detail {

using lock_timer = sim::sim_timer;

}  // namespace redlock::detail

#endif
