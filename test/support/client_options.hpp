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

}  // namespace redlock::test

#endif
