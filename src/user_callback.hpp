#ifndef REDLOCK_USER_CALLBACK_HPP
#define REDLOCK_USER_CALLBACK_HPP

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <exception>

namespace redlock::detail {

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
    try {
      boost::asio::post(executor,
                        [failure = std::current_exception()] { std::rethrow_exception(failure); });
    } catch (...) {
      // Out of memory while reporting the callback's own failure: the exception is lost.
    }
  }
}

}  // namespace redlock::detail

#endif
