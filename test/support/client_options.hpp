#ifndef REDLOCK_TEST_SUPPORT_CLIENT_OPTIONS_HPP
#define REDLOCK_TEST_SUPPORT_CLIENT_OPTIONS_HPP

#include "redlock/options.hpp"

#include <chrono>

namespace redlock::test {

// Client options for tests against local nodes: a short node deadline, so that a dead, stopped or
// delayed node costs a round little, and fast reconnects, so that a restarted node is used again
// within a fraction of a second.
inline client_options fast_client_options(
    std::chrono::milliseconds node_timeout = std::chrono::milliseconds(200)) {
  client_options options;
  options.node_timeout = node_timeout;
  options.reconnect = {std::chrono::milliseconds(10), std::chrono::milliseconds(200), 2.0};
  return options;
}

enum class renewal : bool { off, on };

// A lock for tests: `ttl`, renewal as asked (on, as in the library, by default), and retries every
// few milliseconds (5 ms doubling to 50 ms) instead of the library's pacing for production, so
// that waiting tests do not wait long.
inline lock_options lock_for(std::chrono::milliseconds ttl, renewal renew = renewal::on) {
  lock_options options;
  options.ttl = ttl;
  options.retry = {std::chrono::milliseconds(5), std::chrono::milliseconds(50), 2.0};
  options.auto_renew = renew == renewal::on;
  return options;
}

}  // namespace redlock::test

#endif
