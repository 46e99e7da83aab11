#ifndef REDLOCK_DETAIL_DEFAULT_TOKEN_HPP
#define REDLOCK_DETAIL_DEFAULT_TOKEN_HPP

#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <type_traits>

namespace redlock::detail {

// The completion token an async_ function of the library uses when the caller passes none.
//
// Asio's own default, default_completion_token_t<Executor>, is the executor's
// default_completion_token_type. In Boost 1.81 it is void for an executor that names none, such as
// any_io_executor (later releases default to deferred), and a token parameter defaulted to void
// makes every call without a token fail deep inside async_initiate ("forming reference to void").
// The library falls back to boost::asio::deferred_t then: a call without a token returns the
// operation, unlaunched, for the caller to co_await or to launch with a token of their choice.
template <class Executor>
using default_token_t =
    std::conditional_t<std::is_void_v<boost::asio::default_completion_token_t<Executor>>,
                       boost::asio::deferred_t, boost::asio::default_completion_token_t<Executor>>;

}  // namespace redlock::detail

#endif
