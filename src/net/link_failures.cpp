#include "net/link_failures.hpp"

#include "net/handshake.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <utility>

namespace redlock::detail {

link_failures::link_failures(std::string name, const retry_policy& reconnect, std::uint32_t seed)
    : name_(std::move(name)), backoff_(reconnect), jitter_(seed) {}

void link_failures::record(boost::system::error_code ec, std::string_view what) {
  // A loop that was cancelled because another one failed must not overwrite the real cause.
  if (ec == boost::asio::error::operation_aborted) return;
  last_cause_ = what;
  last_error_ = fmt::format("{}: {}", name_, what);
}

void link_failures::record_internal_failure(std::string_view what) {
  last_error_ = fmt::format("{}: internal failure: {}", name_, what);
}

void link_failures::connect_finished(boost::system::error_code ec) noexcept {
  // Only a failure of the handshake itself can be permanent: a protocol error later on breaks one
  // link, not the node's configuration.
  permanent_failure_ = is_permanent_connect_failure(ec) ? ec : boost::system::error_code{};
  if (!ec) backoff_.reset();
}

std::chrono::milliseconds link_failures::next_delay() {
  return backoff_.next(jitter_);
}

}  // namespace redlock::detail
