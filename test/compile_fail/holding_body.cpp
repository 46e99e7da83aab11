// Bodies that redlock::with_lock and redlock::with_permit must refuse at compile time, one per
// value of HOLDING_CASE (see test/CMakeLists.txt). Each must stop the compile with the
// static_assert that states the rule for the body, as the first error. HOLDING_CASE 0 is a pair
// of bodies that follow the rule and must compile: it shows that the command itself is sound.

#include "redlock/redlock.hpp"

#include <boost/asio/awaitable.hpp>

#include <optional>

namespace asio = boost::asio;

asio::awaitable<void> hold(redlock::client& locks, redlock::semaphore& permits) {
  const redlock::lock_options options;
#if HOLDING_CASE == 0
  const int value = co_await redlock::with_lock(
      locks, "r", options, [](redlock::lease&) -> asio::awaitable<int> { co_return 7; });
  co_await redlock::with_permit(permits,
                                [](redlock::lease&) -> asio::awaitable<void> { co_return; });
  (void)value;
#elif HOLDING_CASE == 1
  // Returns void: a plain lambda where a coroutine was meant.
  co_await redlock::with_lock(locks, "r", options, [](redlock::lease&) {});
  (void)permits;
#elif HOLDING_CASE == 2
  // Returns a value, not an awaitable.
  co_await redlock::with_lock(locks, "r", options, [](redlock::lease&) { return 7; });
  (void)permits;
#elif HOLDING_CASE == 3
  // Cannot be called with the lease.
  co_await redlock::with_lock(locks, "r", options, [](int) -> asio::awaitable<void> { co_return; });
  (void)permits;
#elif HOLDING_CASE == 4
  // Returns something else that holds a value: not awaitable.
  co_await redlock::with_lock(locks, "r", options,
                              [](redlock::lease&) { return std::optional<int>(7); });
  (void)permits;
#elif HOLDING_CASE == 5
  // with_permit, returning void.
  co_await redlock::with_permit(permits, [](redlock::lease&) {});
  (void)locks;
  (void)options;
#else
#error "unknown HOLDING_CASE"
#endif
}
