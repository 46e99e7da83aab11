// When the commands stop waiting for connections to open: at once when no node is still
// connecting, so that `--wait 0` with the nodes down gives up at once.

#include "redlock/connect_wait.hpp"
#include "redlock/error.hpp"
#include "redlock/inspection.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <initializer_list>

namespace {

namespace cli = redlock::cli;
using redlock::error;
using redlock::error_code;
using redlock::make_error_code;

// A look at nodes that each answered (an empty code) or failed with the given code.
redlock::inspection look(std::initializer_list<error_code> nodes) {
  redlock::inspection seen;
  seen.quorum = nodes.size() / 2 + 1;
  for (const auto ec : nodes) {
    auto& node = seen.nodes.emplace_back();
    node.error = ec;
  }
  return seen;
}

const error_code answered{};
const error_code not_connected = make_error_code(error::not_connected);
const error_code slow = make_error_code(error::request_timeout);
const error_code unresponsive = make_error_code(error::node_unresponsive);
const error_code refused = make_error_code(error::auth_failed);
const error_code no_quorum = make_error_code(error::no_quorum);

}  // namespace

BOOST_AUTO_TEST_SUITE(connect_wait)

// The one node down (connection refused): waiting cannot change the round's outcome.
BOOST_AUTO_TEST_CASE(a_node_that_is_down_is_not_waited_for) {
  BOOST_TEST(!cli::still_connecting(no_quorum, look({not_connected})));
  BOOST_TEST(cli::quorum_connected_or_settled(no_quorum, look({not_connected})));
  BOOST_TEST(cli::quorum_connected_or_settled(no_quorum, look({not_connected, refused, answered})));
}

// A connect or handshake still going shows as a request that timed out: it may finish.
BOOST_AUTO_TEST_CASE(a_node_still_connecting_is_waited_for_until_a_quorum_answers) {
  BOOST_TEST(cli::still_connecting(no_quorum, look({slow})));
  BOOST_TEST(!cli::quorum_connected_or_settled(no_quorum, look({slow})));
  BOOST_TEST(
      !cli::quorum_connected_or_settled(no_quorum, look({not_connected, unresponsive, answered})));
  // A quorum answered: the round can be decided, the slow node does not delay it.
  BOOST_TEST(cli::quorum_connected_or_settled({}, look({slow, answered, answered})));
}

// A look that ended as a whole says nothing about the nodes: nothing to wait for.
BOOST_AUTO_TEST_CASE(a_look_that_ended_as_a_whole_ends_the_wait) {
  BOOST_TEST(!cli::still_connecting(boost::asio::error::operation_aborted, look({slow})));
  BOOST_TEST(!cli::still_connecting(make_error_code(error::invalid_argument), look({slow})));
}

BOOST_AUTO_TEST_SUITE_END()
