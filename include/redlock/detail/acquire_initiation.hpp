#ifndef REDLOCK_DETAIL_ACQUIRE_INITIATION_HPP
#define REDLOCK_DETAIL_ACQUIRE_INITIATION_HPP

// What the acquire templates of client, mutex, semaphore and rw_lock share: the compiled entry
// points of client::async_acquire and async_acquire_all, and the adapter that turns a failed
// acquire into an exception carrying the lease's diagnostics.

#include "redlock/config.hpp"
#include "redlock/detail/initiate.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/associator.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock {

namespace detail {
REDLOCK_API void initiate_acquire(const std::shared_ptr<client_impl>& client, std::string resource,
                                  const lock_options& options, bool single_round,
                                  caller_handler<acquire_signature> caller);
// A set of locks (async_acquire_all).
REDLOCK_API void initiate_acquire(const std::shared_ptr<client_impl>& client,
                                  std::vector<std::string> resources, const lock_options& options,
                                  bool single_round, caller_handler<acquire_signature> caller);

// Tokens that turn an error code into an exception. Left alone they would throw
// system_error(ec), whose message is only the code's; an acquire's lease knows which resource and
// what each node answered, so such tokens get an exception_ptr with that instead.
template <class Token>
struct throws_on_error : std::false_type {};
template <class Executor>
struct throws_on_error<boost::asio::use_awaitable_t<Executor>> : std::true_type {};
template <class Allocator>
struct throws_on_error<boost::asio::use_future_t<Allocator>> : std::true_type {};

// Completes a void(std::exception_ptr, lease) handler from the acquire's void(error_code, lease).
template <class Handler>
struct throw_with_diagnostics {
  Handler inner;

  void operator()(boost::system::error_code ec, redlock::lease acquired) {
    std::exception_ptr failure;
    if (ec) {
      failure = std::make_exception_ptr(boost::system::system_error(
          ec, acquired.diagnostics().empty() ? std::string("redlock: acquire failed")
                                             : acquired.diagnostics()));
    }
    std::move(inner)(failure, std::move(acquired));
  }
};

// async_try_acquire (single_round) and async_acquire, of one resource (a std::string) or of a set
// (a std::vector<std::string>). With Throws, the handler takes void(std::exception_ptr, lease) and
// is completed through throw_with_diagnostics.
template <bool Throws>
struct acquire_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler, class Resources>
  void operator()(Handler&& handler, Resources resource, const lock_options& options,
                  bool single_round) const {
    if constexpr (Throws) {
      initiate_acquire(
          client_, std::move(resource), options, single_round,
          erase_handler<acquire_signature>(
              throw_with_diagnostics<std::decay_t<Handler>>{std::forward<Handler>(handler)},
              executor_of(*client_)));
    } else {
      initiate_acquire(
          client_, std::move(resource), options, single_round,
          erase_handler<acquire_signature>(std::forward<Handler>(handler), executor_of(*client_)));
    }
  }
};
}  // namespace detail

}  // namespace redlock

/// @cond
// The adapter completes on the inner handler's executor, with its allocator and cancellation slot.
template <template <class, class> class Associator, class Handler, class DefaultCandidate>
struct boost::asio::associator<Associator, redlock::detail::throw_with_diagnostics<Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const redlock::detail::throw_with_diagnostics<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.inner);
  }
  static auto get(const redlock::detail::throw_with_diagnostics<Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.inner, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.inner, c);
  }
};
/// @endcond

#endif
