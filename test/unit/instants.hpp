#ifndef REDLOCK_TEST_UNIT_INSTANTS_HPP
#define REDLOCK_TEST_UNIT_INSTANTS_HPP

#include <chrono>

namespace redlock::test {

// Where the machines' tests start their clock: an hour after the steady clock's epoch, so that
// instants before it stay valid time points.
inline const std::chrono::steady_clock::time_point t0 =
    std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

}  // namespace redlock::test

#endif
