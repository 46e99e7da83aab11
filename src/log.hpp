#ifndef REDLOCK_LOG_HPP
#define REDLOCK_LOG_HPP

#include "redlock/options.hpp"
#include "user_callback.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <string_view>

namespace redlock::detail {

// Calls the user's logger, if any, as call_user_callback does.
inline void call_logger(const logger& user_logger, const boost::asio::any_io_executor& executor,
                        log_level level, std::string_view message) noexcept {
  if (!user_logger) return;
  call_user_callback(executor, [&] { user_logger(level, message); });
}

}  // namespace redlock::detail

#endif
