#ifndef REDLOCK_WITH_LOCK_HPP
#define REDLOCK_WITH_LOCK_HPP

#include "redlock/client.hpp"
#include "redlock/detail/run_holding.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"
#include "redlock/resource_list.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <concepts>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock {

namespace detail {
// The coroutine behind both with_lock: one lock (a std::string) or a set (a resource_list). It
// takes what it holds by value: the caller's arguments may be temporaries of the co_await
// expression that are gone once the coroutine runs.
template <class Resources, class F>
auto with_lock_of(client& locks, Resources resources, lock_options options, F body) ->
    typename with_lock_body<F>::type {
  lease held;
  if constexpr (std::is_same_v<Resources, resource_list>) {
    held =
        co_await locks.async_acquire_all(std::move(resources), options, boost::asio::use_awaitable);
  } else {
    held = co_await locks.async_acquire(std::move(resources), options, boost::asio::use_awaitable);
  }
  if constexpr (with_lock_body<F>::valid) {
    co_return co_await run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}
}  // namespace detail

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
/// @par Resource
/// Anything that converts to std::string (a std::string, a string literal), copied before the
/// acquire starts. A braced list of names is a set, taken by the overload below.
///
/// @par F
/// Callable as body(lease&) returning `asio::awaitable<T>`; anything else stops the compile with a
/// static_assert that says so. Runs on the calling coroutine's executor, which must be the client's
/// (or its strand).
template <class Resource, class F>
requires std::convertible_to<Resource, std::string>
auto with_lock(client& locks, Resource&& resource, lock_options options, F body) ->
    typename detail::with_lock_body<F>::type {
  return detail::with_lock_of(locks, std::string(std::forward<Resource>(resource)), options,
                              std::move(body));
}

/// The same for a set of locks: acquires all of `resources` as one lease
/// (client::async_acquire_all), runs `body(lease&)`, and always releases them all. Loss, errors,
/// the body's exceptions and F: as above.
///
/// @par Resources
/// A std::vector<std::string>, or a braced list written at the call
/// (`with_lock(locks, {"{acct}:17", "{acct}:42"}, options, body)`), also inside a co_await with
/// g++ 12; see resource_list.
template <class F>
auto with_lock(client& locks, resource_list resources, lock_options options, F body) ->
    typename detail::with_lock_body<F>::type {
  return detail::with_lock_of(locks, std::move(resources), options, std::move(body));
}

}  // namespace redlock

#endif
