#ifndef REDLOCK_WITH_LOCK_HPP
#define REDLOCK_WITH_LOCK_HPP

#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

namespace redlock {

// Acquires `resource` (client::async_acquire), runs `body(lease&)`, and always releases.
//
// If the lease is lost while the body runs, the body is cancelled (terminal cancellation at its
// current co_await) and with_lock throws boost::system::system_error(error::lock_lost) once the
// body has unwound. Acquire failures throw system_error with their code. An exception from the body
// is rethrown after the release. If the release finds that a quorum no longer held our key
// (error::not_held), the body ran without the lock at some point and with_lock throws
// system_error(error::lock_lost) rather than report success.
//
// F: callable as body(lease&) returning asio::awaitable<T>. Runs on the calling coroutine's
// executor, which must be the client's (or its strand).
template <class F>
auto with_lock(client& locks, std::string resource, lock_options options, F body)
    -> std::invoke_result_t<F&, lease&> {
  using namespace boost::asio::experimental::awaitable_operators;
  using result_awaitable = std::invoke_result_t<F&, lease&>;
  using T = typename result_awaitable::value_type;
  constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);

  lease held =
      co_await locks.async_acquire(std::move(resource), options, boost::asio::use_awaitable);

  auto release = [&held]() -> boost::asio::awaitable<boost::system::error_code> {
    auto [ec] = co_await held.async_release(boost::asio::as_tuple(boost::asio::use_awaitable));
    co_return ec;
  };

  std::exception_ptr failure;
  boost::system::error_code ended_by;  // why the wait for loss ended first, if it did
  auto run =
      [&]() -> boost::asio::awaitable<std::conditional_t<std::is_void_v<T>, std::monostate, T>> {
    if constexpr (std::is_void_v<T>) {
      co_await body(held);
      co_return std::monostate{};
    } else {
      co_return co_await body(held);
    }
  };

  std::variant<std::monostate, std::conditional_t<std::is_void_v<T>, std::monostate, T>> value;
  try {
    auto outcome = co_await (run() || held.async_wait_lost(tuple_awaitable));
    if (outcome.index() == 0) {
      value.template emplace<1>(std::move(std::get<0>(outcome)));
    } else {
      ended_by = std::get<0>(std::get<1>(outcome));
    }
  } catch (...) {
    failure = std::current_exception();
  }

  const auto release_error = co_await release();
  if (failure) std::rethrow_exception(failure);
  if (ended_by == error::lock_lost || release_error == error::not_held) {
    throw boost::system::system_error(make_error_code(error::lock_lost),
                                      "redlock: lock on \"" + held.resource() + "\" was lost");
  }
  if (ended_by) {
    // The lease ended otherwise under the body (client destroyed): the body did not finish.
    throw boost::system::system_error(ended_by, "redlock: lock on \"" + held.resource() + "\"");
  }
  if constexpr (!std::is_void_v<T>) {
    co_return std::move(std::get<1>(value));
  }
}

}  // namespace redlock

#endif
