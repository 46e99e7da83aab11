#ifndef REDLOCK_NET_USE_TUPLE_HPP
#define REDLOCK_NET_USE_TUPLE_HPP

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace redlock::detail {

// The completion token of the library's own coroutines: `co_await op(use_tuple)` gives the
// error code (and the results) as a tuple instead of throwing.
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace redlock::detail

#endif
