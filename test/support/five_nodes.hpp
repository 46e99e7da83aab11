#ifndef REDLOCK_TEST_SUPPORT_FIVE_NODES_HPP
#define REDLOCK_TEST_SUPPORT_FIVE_NODES_HPP

#include "support/inspector.hpp"
#include "support/redis_fleet.hpp"

namespace redlock::test {

// The usual cast of an integration test, for BOOST_FIXTURE_TEST_CASE(name, five_nodes): five fresh
// Redis servers on free loopback ports, and an inspector that reads and writes their keys without
// the library. The servers stop when the test case ends, whatever its outcome.
struct five_nodes {
  redis_fleet fleet{5};
  inspector nodes{fleet};
};

}  // namespace redlock::test

#endif
