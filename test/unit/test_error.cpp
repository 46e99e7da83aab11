// The "redlock" error category: every enumerator has its own message and converts implicitly.

#include "redlock/error.hpp"
#include "support/printing.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

BOOST_AUTO_TEST_SUITE(error_codes)

BOOST_AUTO_TEST_CASE(every_code_has_a_distinct_message_in_the_redlock_category) {
  std::set<std::string> messages;
  for (int e = static_cast<int>(redlock::error::invalid_argument);
       e <= static_cast<int>(redlock::error::wrong_node_kind); ++e) {
    const redlock::error_code ec = static_cast<redlock::error>(e);
    BOOST_TEST_CONTEXT("code " << e) {
      BOOST_TEST(ec.failed());
      BOOST_TEST(std::string(ec.category().name()) == "redlock");
      BOOST_TEST(ec.message().find("unknown") == std::string::npos);
      BOOST_TEST(messages.insert(ec.message()).second);
    }
  }
  BOOST_TEST(redlock::error_code(redlock::error::lock_lost) == redlock::error::lock_lost);
  BOOST_TEST(redlock::error_code(redlock::error::lock_lost) != redlock::error::not_held);
  BOOST_TEST(redlock::error_category().message(999).find("999") != std::string::npos);
}

// condition::node_failure groups the codes of a node that is set up wrongly; nothing else is one.
BOOST_AUTO_TEST_CASE(node_failure_condition_holds_exactly_the_lasting_node_errors) {
  using redlock::condition;
  using redlock::error;
  for (const auto e :
       {error::auth_failed, error::select_failed, error::permission_denied, error::protocol_error,
        error::tls_handshake_failed, error::certificate_rejected, error::wrong_node_kind}) {
    const redlock::error_code ec = e;
    BOOST_TEST_CONTEXT(ec.message()) {
      BOOST_TEST((ec == condition::node_failure));
    }
  }
  for (const auto e :
       {error::invalid_argument, error::no_quorum, error::contended, error::wait_timeout,
        error::not_connected, error::connection_lost, error::request_timeout,
        error::connect_timeout, error::node_unresponsive, error::server_error, error::lock_lost}) {
    const redlock::error_code ec = e;
    BOOST_TEST_CONTEXT(ec.message()) {
      BOOST_TEST((ec != condition::node_failure));
    }
  }
  // A system error with the same value as a redlock code is no node failure.
  const redlock::error_code refused(static_cast<int>(error::auth_failed),
                                    boost::system::system_category());
  BOOST_TEST((refused != condition::node_failure));
  const boost::system::error_condition cond = condition::node_failure;
  BOOST_TEST(std::string(cond.category().name()) == "redlock.condition");
  BOOST_TEST(cond.message().find("configuration") != std::string::npos);
}

// condition::not_acquired groups the outcomes of an acquire that may succeed when tried again.
BOOST_AUTO_TEST_CASE(not_acquired_condition_holds_exactly_the_retryable_outcomes) {
  using redlock::condition;
  using redlock::error;
  for (int e = static_cast<int>(error::invalid_argument);
       e <= static_cast<int>(error::permission_denied); ++e) {
    const redlock::error_code ec = static_cast<error>(e);
    const auto code = static_cast<error>(e);
    const bool expected = code == error::contended || code == error::no_quorum ||
                          code == error::validity_expired || code == error::wait_timeout;
    BOOST_TEST_CONTEXT(ec.message()) {
      BOOST_TEST((ec == condition::not_acquired) == expected);
      // The two conditions never overlap.
      BOOST_TEST(!((ec == condition::not_acquired) && (ec == condition::node_failure)));
    }
  }
  const redlock::error_code aborted = boost::asio::error::operation_aborted;
  BOOST_TEST((aborted != condition::not_acquired));
  const redlock::error_code same_value(static_cast<int>(error::contended),
                                       boost::system::generic_category());
  BOOST_TEST((same_value != condition::not_acquired));
  const boost::system::error_condition cond = condition::not_acquired;
  BOOST_TEST(cond.message().find("not acquired") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
