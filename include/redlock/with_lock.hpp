#ifndef REDLOCK_WITH_LOCK_HPP
#define REDLOCK_WITH_LOCK_HPP

#include "redlock/client.hpp"
#include "redlock/detail/run_holding.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock {

/// Acquires `resource` (client::async_acquire), runs `body(lease&)`, and always releases.
///
/// If the lease is lost while the body runs, the body is cancelled (terminal cancellation at its
/// current co_await) and with_lock throws boost::system::system_error(error::lock_lost) once the
/// body has unwound. Acquire failures throw system_error with their code, and a message naming the
/// resource and what each node answered (lease::diagnostics). An exception from the body
/// is rethrown after the release. If the release finds that a quorum no longer held our key
/// (error::not_held), the body ran without the lock at some point and with_lock throws
/// system_error(error::lock_lost) rather than report success.
///
/// @par F
/// Callable as body(lease&) returning `asio::awaitable<T>`; anything else stops the compile with a
/// static_assert that says so. Runs on the calling coroutine's executor, which must be the client's
/// (or its strand).
template <class F>
auto with_lock(client& locks, std::string resource, lock_options options, F body) ->
    typename detail::with_lock_body<F>::type {
  lease held =
      co_await locks.async_acquire(std::move(resource), options, boost::asio::use_awaitable);
  if constexpr (detail::with_lock_body<F>::valid) {
    co_return co_await detail::run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}

/// The same for a set of locks: acquires all of `resources` as one lease
/// (client::async_acquire_all), runs `body(lease&)`, and always releases them all. Loss, errors,
/// the body's exceptions and F: as above.
template <class F>
auto with_lock(client& locks, std::vector<std::string> resources, lock_options options, F body) ->
    typename detail::with_lock_body<F>::type {
  lease held =
      co_await locks.async_acquire_all(std::move(resources), options, boost::asio::use_awaitable);
  if constexpr (detail::with_lock_body<F>::valid) {
    co_return co_await detail::run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}

}  // namespace redlock

#endif
