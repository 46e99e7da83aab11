// The "redlock" error category: every enumerator has its own message and converts implicitly.

#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

#include "redlock/error.hpp"
#include "support/printing.hpp"

BOOST_AUTO_TEST_SUITE(error)

BOOST_AUTO_TEST_CASE(every_code_has_a_distinct_message_in_the_redlock_category) {
  std::set<std::string> messages;
  for (int e = static_cast<int>(redlock::error::invalid_argument);
       e <= static_cast<int>(redlock::error::node_unresponsive); ++e) {
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

BOOST_AUTO_TEST_SUITE_END()
