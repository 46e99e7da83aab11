#ifndef REDLOCK_USER_CALLBACK_HPP
#define REDLOCK_USER_CALLBACK_HPP

#include <boost/asio/any_io_executor.hpp>

#include <exception>

namespace redlock::detail {

// Rethrows `failure` from a handler posted to `executor`. Out of line and cold: the callers'
// frames stay as small as a plain call while no callback throws.
[[gnu::cold]] void post_callback_failure(const boost::asio::any_io_executor& executor,
                                         std::exception_ptr failure) noexcept;

// Calls user code (a logger, an observer) from inside the library: a connection's read loop, a
// vote being decided, where an exception must not unwind, since that would end a loop or leave an
// operation half done. One it throws is rethrown from a handler posted to `executor` instead, so
// that it comes out of io_context::run() like an exception from any other handler. Inline: an
// observer is called twice per lock, and the call itself would cost a frame each time.
template <class Call>
[[gnu::always_inline]] inline void call_user_callback(const boost::asio::any_io_executor& executor,
                                                      Call&& call) noexcept {
  try {
    call();
  } catch (...) {
    post_callback_failure(executor, std::current_exception());
  }
}

}  // namespace redlock::detail

#endif
