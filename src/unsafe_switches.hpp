#ifndef REDLOCK_UNSAFE_SWITCHES_HPP
#define REDLOCK_UNSAFE_SWITCHES_HPP

// Switches that make the library unsafe on purpose, for the tests that show a checker catching
// what they break. Compiled in only where the tests are built (REDLOCK_TEST_HOOKS, set by
// CMakeLists.txt with REDLOCK_BUILD_TESTS); anywhere else each switch is a constant false.

#if defined(REDLOCK_TEST_HOOKS)
#include <atomic>
#endif

namespace redlock::detail {

// Defects that once were made, or that a careless change could make, brought back one at a time
// so that the simulation (test/sim, redlock_sim --defect) shows that its checkers catch each.
enum class known_defect : unsigned char {
  none,
  // A read-write lock's writer writes its fencing token back to the counter of its own key
  // instead of the lock's counter: a later writer granted by other nodes gets a smaller token.
  rw_fence_wrong_counter,
  // The release script deletes the key without comparing its value with the token.
  release_without_token,
  // A round's validity ignores the time the round took: ttl - drift.
  validity_without_elapsed,
  // A failed round does not release what it set on the nodes that granted it.
  failed_round_not_cleaned,
  // A release announcement heard while a round is in flight is dropped.
  announcement_dropped_in_round,
  // A set of locks is granted on a node where only its first key is free.
  set_checks_first_key_only,
  // A fenced reader of a read-write lock does not write its token back (found by the
  // simulation): a later writer may get the same token, and a store cannot refuse the reader.
  reader_fence_not_written_back,
  // The renewals' script (batch_extend_script) extends a key whatever token it holds.
  renewal_without_token,
};

#if defined(REDLOCK_TEST_HOOKS)
// A fenced acquire hands out the highest counter of its grants without raising the granting
// nodes' counters to it (no write-back): tokens can then go backwards in lock order. Read on every
// use; never set outside tests.
extern std::atomic<bool> skip_fence_write_back_for_tests;
inline bool skipping_fence_write_back() noexcept {
  return skip_fence_write_back_for_tests;
}
// The defect in force; set before any client is made, never outside tests.
extern std::atomic<known_defect> defect_for_tests;
inline bool has_defect(known_defect defect) noexcept {
  return defect_for_tests.load(std::memory_order_relaxed) == defect;
}
// Not 0: every renewal tick (renewal_tick) is this many milliseconds. Safe, not a defect: the
// simulation widens the ticks so that the few leases of its histories often renew in one batch.
// Set before any client is made, never outside tests.
extern std::atomic<int> renewal_tick_ms_for_tests;
inline int renewal_tick_override_ms() noexcept {
  return renewal_tick_ms_for_tests.load(std::memory_order_relaxed);
}
#else
constexpr bool skipping_fence_write_back() noexcept {
  return false;
}
constexpr bool has_defect(known_defect) noexcept {
  return false;
}
constexpr int renewal_tick_override_ms() noexcept {
  return 0;
}
#endif

}  // namespace redlock::detail

#endif
