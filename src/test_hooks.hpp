#ifndef REDLOCK_TEST_HOOKS_HPP
#define REDLOCK_TEST_HOOKS_HPP

#include <atomic>

namespace redlock::detail {

// Switches that make the library unsafe on purpose, for the tests that show a checker catching
// what they break. Never set outside tests; read on every use.

// A fenced acquire hands out the highest counter of its grants without raising the granting
// nodes' counters to it (no write-back): tokens can then go backwards in lock order.
extern std::atomic<bool> skip_fence_write_back_for_tests;

}  // namespace redlock::detail

#endif
