#ifndef REDLOCK_DETAIL_RUN_HOLDING_HPP
#define REDLOCK_DETAIL_RUN_HOLDING_HPP

#include "redlock/detail/quoted_resource.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace redlock::detail {

template <class R>
struct is_default_awaitable : std::false_type {};
template <class T>
struct is_default_awaitable<boost::asio::awaitable<T>> : std::true_type {};

template <class F, bool Callable = std::is_invocable_v<F&, lease&>>
struct body_result {
  using type = void;
};
template <class F>
struct body_result<F, true> {
  using type = std::invoke_result_t<F&, lease&>;
};

// The rule for a body given to with_lock or with_permit, checked where their return type is
// formed, so that a body breaking it stops the compile with the static_assert below as its first
// error rather than with one from deep inside run_holding. `type` is what the function returns:
// the body's awaitable, or awaitable<void> after a failed check, which keeps further errors from
// piling up.
template <class F>
struct holding_body {
  static constexpr bool valid =
      std::is_invocable_v<F&, lease&> && is_default_awaitable<typename body_result<F>::type>::value;
  using type =
      std::conditional_t<valid, typename body_result<F>::type, boost::asio::awaitable<void>>;
};

template <class F>
struct with_lock_body : holding_body<F> {
  static_assert(holding_body<F>::valid,
                "redlock::with_lock: the body must be callable as body(redlock::lease&) and "
                "return boost::asio::awaitable<T> (a coroutine lambda with an explicit "
                "`-> boost::asio::awaitable<T>` return type)");
};

template <class F>
struct with_permit_body : holding_body<F> {
  static_assert(holding_body<F>::valid,
                "redlock::with_permit: the body must be callable as body(redlock::lease&) and "
                "return boost::asio::awaitable<T> (a coroutine lambda with an explicit "
                "`-> boost::asio::awaitable<T>` return type)");
};

template <class F>
struct with_read_lock_body : holding_body<F> {
  static_assert(holding_body<F>::valid,
                "redlock::with_read_lock: the body must be callable as body(redlock::lease&) and "
                "return boost::asio::awaitable<T> (a coroutine lambda with an explicit "
                "`-> boost::asio::awaitable<T>` return type)");
};

template <class F>
struct with_write_lock_body : holding_body<F> {
  static_assert(holding_body<F>::valid,
                "redlock::with_write_lock: the body must be callable as body(redlock::lease&) and "
                "return boost::asio::awaitable<T> (a coroutine lambda with an explicit "
                "`-> boost::asio::awaitable<T>` return type)");
};

// The part of with_lock and with_permit after the acquire: runs `body(held)` until it finishes or
// the lease ends, then always releases; see with_lock for what is thrown. `held` and `body` live
// in the caller's frame, which awaits this at once.
template <class F>
auto run_holding(lease& held, F& body) -> std::invoke_result_t<F&, lease&> {
  namespace asio = boost::asio;
  using T = typename std::invoke_result_t<F&, lease&>::value_type;
  using value_type = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

  auto run = [&]() -> asio::awaitable<value_type> {
    if constexpr (std::is_void_v<T>) {
      co_await body(held);
      co_return std::monostate{};
    } else {
      co_return co_await body(held);
    }
  };

  // wait_for_one, not operator||: that one waits for the first *success*, so a throwing body would
  // wait for the loss of a lock that is never lost.
  auto executor = co_await asio::this_coro::executor;
  auto [order, body_failure, value, ended_by] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(executor, run(), asio::deferred), held.async_wait_lost(asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  const bool body_finished_first = order[0] == 0;
  // Why the lease ended, if it did: the release below replaces it.
  std::string ended_why = held.diagnostics();

  auto [release_error] = co_await held.async_release(asio::as_tuple(asio::use_awaitable));

  if (!body_finished_first) {
    // The lease ended under the body, which was cancelled. Lost: say so. Otherwise the client was
    // destroyed or the lease released by someone else: the body did not complete either.
    const auto why = ended_by == error::lock_lost ? make_error_code(error::lock_lost) : ended_by;
    if (ended_why.empty()) {
      ended_why = "redlock: lock on " + detail::quoted_resource(held.resource()) + " ended";
    }
    throw boost::system::system_error(why, ended_why);
  }
  if (body_failure) std::rethrow_exception(body_failure);
  if (release_error == error::not_held) {
    // A quorum no longer held our key when the body ended: it ran without the lock at some point.
    throw boost::system::system_error(
        make_error_code(error::lock_lost),
        held.diagnostics().empty()
            ? "redlock: lock on " + detail::quoted_resource(held.resource()) + " was lost"
            : held.diagnostics());
  }
  if constexpr (!std::is_void_v<T>) co_return std::move(value);
}

}  // namespace redlock::detail

#endif
