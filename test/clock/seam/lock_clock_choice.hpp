#ifndef REDLOCK_TEST_CLOCK_SEAM_LOCK_CLOCK_CHOICE_HPP
#define REDLOCK_TEST_CLOCK_SEAM_LOCK_CLOCK_CHOICE_HPP

// The clock seam's choice for builds that put this folder on the include path before src/: the
// virtual clock (see src/clock.hpp).

#include "clock/virtual_clock.hpp"

#endif
