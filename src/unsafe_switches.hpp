#ifndef REDLOCK_UNSAFE_SWITCHES_HPP
#define REDLOCK_UNSAFE_SWITCHES_HPP

// Switches that make the library unsafe on purpose, for the tests that show a checker catching
// what they break. Compiled in only where the tests are built (REDLOCK_TEST_HOOKS, set by
// CMakeLists.txt with REDLOCK_BUILD_TESTS); anywhere else each switch is a constant false.

#if defined(REDLOCK_TEST_HOOKS)
#include <atomic>
#endif

namespace redlock::detail {

#if defined(REDLOCK_TEST_HOOKS)
// A fenced acquire hands out the highest counter of its grants without raising the granting
// nodes' counters to it (no write-back): tokens can then go backwards in lock order. Read on every
// use; never set outside tests.
extern std::atomic<bool> skip_fence_write_back_for_tests;
inline bool skipping_fence_write_back() noexcept {
  return skip_fence_write_back_for_tests;
}
#else
constexpr bool skipping_fence_write_back() noexcept {
  return false;
}
#endif

}  // namespace redlock::detail

#endif
