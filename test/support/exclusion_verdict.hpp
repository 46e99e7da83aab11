#ifndef REDLOCK_TEST_SUPPORT_EXCLUSION_VERDICT_HPP
#define REDLOCK_TEST_SUPPORT_EXCLUSION_VERDICT_HPP

#include "support/history.hpp"

#include <boost/test/unit_test.hpp>

namespace redlock::test {

// The mutual-exclusion checker's verdict on what the clients saw, with its description written to
// the test log whatever it is, so that a passing fault test still shows the holds it judged.
inline check_result judge_exclusion(const history& log) {
  auto result = check_mutual_exclusion(log.events());
  BOOST_TEST_MESSAGE(result.describe());
  return result;
}

}  // namespace redlock::test

#endif
