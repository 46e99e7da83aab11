// The clock seam (src/clock.hpp): library code compiled with a clock of the test's own runs on
// that clock's time, not the machine's. Here the local queues, whose claims and hand-off window are
// times: a set's claim lasts its TTL of virtual time, ends when the virtual clock passes it
// (however little real time went by), and not a moment before.

#include "clock.hpp"
#include "clock/virtual_clock.hpp"
#include "lock/local_queues.hpp"
#include "support/recorded_acquire.hpp"

#define BOOST_TEST_MODULE redlock_virtual_clock_tests
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using redlock::detail::local_queues;
using redlock::detail::lock_clock;
using redlock::detail::queue_holder;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

using waiter = redlock::test::recorded_acquire;

}  // namespace

BOOST_AUTO_TEST_SUITE(virtual_clock)

BOOST_AUTO_TEST_CASE(the_library_reads_the_clock_it_was_built_with) {
  static_assert(!std::is_same_v<lock_clock, std::chrono::steady_clock>);
  const auto before = lock_clock::now();
  lock_clock::advance(5s);
  BOOST_TEST((lock_clock::now() - before == 5s));
}

// A set that cannot start claims its queues for its TTL once overtaken often enough: the claim ends
// at virtual now + TTL exactly, holds until the virtual clock reaches it, and then the set yields.
BOOST_AUTO_TEST_CASE(a_sets_claim_lasts_its_ttl_of_virtual_time) {
  local_queues queues{"redlock:released", 0.01};
  queue_holder holder_of_a;
  queues.queue_for("a").holder = &holder_of_a;
  auto set = std::make_shared<waiter>();
  queues.join(set, std::vector<std::string>{"a", "b"}, 30s);
  BOOST_TEST_REQUIRE(!queues.try_start(*set));

  const auto claimed_at = lock_clock::now();
  for (unsigned i = 0; i < local_queues::set_overtakes_before_claim; ++i) {
    auto passer = std::make_shared<waiter>();
    queues.join(passer, std::vector<std::string>{"b"}, 30s);
    BOOST_TEST_REQUIRE(queues.try_start(*passer));
    queues.leave(*passer, std::vector<std::string>{"b"}, true);
  }
  BOOST_TEST_REQUIRE(set->claimed_until.has_value());
  BOOST_TEST((*set->claimed_until == claimed_at + 30s));

  auto kept = std::make_shared<waiter>();
  queues.join(kept, std::vector<std::string>{"b"}, 30s);
  BOOST_TEST(!queues.try_start(*kept), "the claiming set keeps a later acquire behind it");
  lock_clock::advance(29s);
  BOOST_TEST(!queues.try_start(*kept), "the claim holds until its end");
  lock_clock::advance(1s);
  BOOST_TEST(queues.try_start(*kept), "once virtual time reaches the claim's end, the set yields");
  queues.leave(*kept, std::vector<std::string>{"b"}, true);
  queues.leave(*set, std::vector<std::string>{"a", "b"}, true);
}

BOOST_AUTO_TEST_SUITE_END()
