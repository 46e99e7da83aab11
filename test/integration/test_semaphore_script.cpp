// The semaphore's acquire script on a real server: one slot set where it is free, the PTTL of
// every slot where it is not, the fencing counter incremented only with a grant.
#include "scripts.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace {

using redlock::detail::semaphore_acquire_script;
using redlock::detail::semaphore_slot_key;
using redlock::test::sync_client;

// EVAL of the script on slots 0..permits-1 of "jobs", trying `tried` (0-based).
redlock::resp::value try_slot(sync_client& c, std::size_t permits, std::size_t tried,
                              const std::string& token, bool fenced = false) {
  std::vector<std::string> command = {"EVAL", semaphore_acquire_script().source(),
                                      std::to_string(permits + (fenced ? 1 : 0))};
  for (std::size_t slot = 0; slot < permits; ++slot)
    command.push_back(semaphore_slot_key("jobs", slot));
  if (fenced)
    command.push_back(redlock::detail::fencing_counter_key(semaphore_slot_key("jobs", tried)));
  for (const std::string& arg :
       {std::to_string(tried + 1), token, std::string("10000"), std::string(fenced ? "1" : "0")})
    command.push_back(arg);
  const std::vector<std::string_view> words(command.begin(), command.end());
  return c.command(words);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(semaphore_script)

BOOST_AUTO_TEST_CASE(a_free_slot_is_granted_and_a_held_one_reports_every_slot) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(try_slot(c, 3, 1, "a").text == "OK");
  BOOST_TEST(c.command({"GET", semaphore_slot_key("jobs", 1)}).text == "a");
  c.command({"SET", semaphore_slot_key("jobs", 2), "c"});  // no TTL
  const auto refused = try_slot(c, 3, 1, "b");
  BOOST_TEST_REQUIRE(refused.elements.size() == 3u);
  BOOST_TEST(refused.elements[0].integer == -2);  // free
  BOOST_TEST(refused.elements[1].integer > 9000);
  BOOST_TEST(refused.elements[1].integer <= 10000);
  BOOST_TEST(refused.elements[2].integer == -1);  // held without expiry
  BOOST_TEST(c.command({"GET", semaphore_slot_key("jobs", 1)}).text == "a");
}

BOOST_AUTO_TEST_CASE(with_fencing_a_grant_increments_the_slots_counter_and_a_refusal_does_not) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  const auto counter = redlock::detail::fencing_counter_key(semaphore_slot_key("jobs", 0));
  const auto granted = try_slot(c, 2, 0, "a", true);
  BOOST_TEST(granted.integer == 1);
  const auto refused = try_slot(c, 2, 0, "b", true);
  BOOST_TEST_REQUIRE(refused.elements.size() == 2u);  // the counter is not a slot
  BOOST_TEST(refused.elements[1].integer == -2);
  BOOST_TEST(c.command({"GET", counter}).text == "1");
}

BOOST_AUTO_TEST_SUITE_END()
