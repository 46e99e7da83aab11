#include "user_callback.hpp"

#include <boost/asio/post.hpp>

namespace redlock::detail {

void post_callback_failure(const boost::asio::any_io_executor& executor,
                           std::exception_ptr failure) noexcept {
  try {
    boost::asio::post(executor, [failure] { std::rethrow_exception(failure); });
  } catch (...) {
    // Out of memory while reporting the callback's own failure: the exception is lost.
  }
}

}  // namespace redlock::detail
