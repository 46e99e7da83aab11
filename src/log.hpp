#ifndef REDLOCK_LOG_HPP
#define REDLOCK_LOG_HPP

#include "redlock/options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <exception>
#include <string_view>

namespace redlock::detail {

// Calls the user's logger. It is user code, called from inside the library (a connection's read
// loop, a vote being decided), where an exception must not unwind: that would end a loop or leave
// an operation half done. One it throws is rethrown from a handler posted to `executor` instead, so
// that it comes out of io_context::run() like an exception from any other handler.
inline void call_logger(const logger& user_logger, const boost::asio::any_io_executor& executor,
                        log_level level, std::string_view message) noexcept {
  if (!user_logger) return;
  try {
    user_logger(level, message);
  } catch (...) {
    try {
      boost::asio::post(executor,
                        [failure = std::current_exception()] { std::rethrow_exception(failure); });
    } catch (...) {
      // Out of memory while reporting the logger's own failure: the message is lost.
    }
  }
}

}  // namespace redlock::detail

#endif
