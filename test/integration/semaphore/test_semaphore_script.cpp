// The semaphore's acquire script on a real server: one slot set where it is free, the PTTL of
// every slot where it is not, the fencing counter incremented only with a grant, and the record
// of how many permits the holders count with.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "support/eval_script.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace {

using redlock::detail::semaphore_acquire_script;
using redlock::detail::semaphore_permits_key;
using redlock::detail::semaphore_slot_key;

// EVAL of the script on slots 0..permits-1 of "jobs", trying `tried` (0-based), with `ttl` ms.
redlock::resp::value try_slot(sync_client& c, std::size_t permits, std::size_t tried,
                              const std::string& token, bool fenced = false,
                              const std::string& ttl = "10000") {
  std::vector<std::string> command = {"EVAL", semaphore_acquire_script().source(),
                                      std::to_string(permits + 1 + (fenced ? 1 : 0))};
  for (std::size_t slot = 0; slot < permits; ++slot)
    command.push_back(semaphore_slot_key("jobs", slot));
  command.push_back(semaphore_permits_key("jobs"));
  if (fenced)
    command.push_back(redlock::detail::fencing_counter_key(semaphore_slot_key("jobs", tried)));
  for (const std::string& arg : {std::to_string(tried + 1), token, ttl, std::to_string(permits)})
    command.push_back(arg);
  if (fenced) command.push_back("1");
  const std::vector<std::string_view> words(command.begin(), command.end());
  return c.command(words);
}

// A refusal's text as numbers.
std::vector<long long> ttls_of(const redlock::resp::value& refusal) {
  std::vector<long long> ttls;
  std::size_t start = 0;
  while (start <= refusal.text.size()) {
    auto end = refusal.text.find(',', start);
    if (end == std::string::npos) end = refusal.text.size();
    ttls.push_back(std::stoll(refusal.text.substr(start, end - start)));
    start = end + 1;
  }
  return ttls;
}

using redlock::test::pttl;

}  // namespace

BOOST_AUTO_TEST_SUITE(semaphore_script)

BOOST_AUTO_TEST_CASE(a_free_slot_is_granted_and_a_held_one_reports_every_slot) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(try_slot(c, 3, 1, "a").text == "OK");
  BOOST_TEST(c.command({"GET", semaphore_slot_key("jobs", 1)}).text == "a");
  c.command({"SET", semaphore_slot_key("jobs", 2), "c"});  // no TTL
  const auto refused = try_slot(c, 3, 1, "b");
  BOOST_TEST_REQUIRE((refused.kind == redlock::resp::type::bulk_string), refused.text);
  const auto ttls = ttls_of(refused);
  BOOST_TEST_REQUIRE(ttls.size() == 3u);
  BOOST_TEST(ttls[0] == -2);  // free
  BOOST_TEST(ttls[1] > 9000);
  BOOST_TEST(ttls[1] <= 10000);
  BOOST_TEST(ttls[2] == -1);  // held without expiry
  BOOST_TEST(c.command({"GET", semaphore_slot_key("jobs", 1)}).text == "a");
}

BOOST_AUTO_TEST_CASE(with_fencing_a_grant_increments_the_slots_counter_and_a_refusal_does_not) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  const auto counter = redlock::detail::fencing_counter_key(semaphore_slot_key("jobs", 0));
  const auto granted = try_slot(c, 2, 0, "a", true);
  BOOST_TEST_REQUIRE((granted.kind == redlock::resp::type::array && granted.elements.size() == 1u));
  BOOST_TEST(granted.elements[0].text == "1");
  const auto refused = try_slot(c, 2, 0, "b", true);
  const auto ttls = ttls_of(refused);
  BOOST_TEST_REQUIRE(ttls.size() == 2u);  // neither the record nor the counter is a slot
  BOOST_TEST(ttls[1] == -2);
  BOOST_TEST(c.command({"GET", counter}).text == "1");
}

// The largest semaphore's refusal is one string of at most 21 bytes a slot, which any reply limit
// the client accepts for such a semaphore can read; an array of 1024 integers could not be.
BOOST_AUTO_TEST_CASE(a_full_semaphore_of_the_most_permits_refuses_in_one_short_string) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  constexpr std::size_t permits = 1024;
  for (std::size_t slot = 0; slot < permits; ++slot)
    c.command({"SET", semaphore_slot_key("jobs", slot), "other", "PX", "60000"});
  const auto refused = try_slot(c, permits, 7, "b");
  BOOST_TEST_REQUIRE((refused.kind == redlock::resp::type::bulk_string), refused.text);
  BOOST_TEST(refused.text.size() <= permits * redlock::detail::semaphore_refusal_bytes_per_permit);
  const auto ttls = ttls_of(refused);
  BOOST_TEST_REQUIRE(ttls.size() == permits);
  for (const long long ttl : ttls)
    BOOST_TEST((ttl > 50000 && ttl <= 60000), ttl);
}

// The first grant records the number of permits; a call that counts another number is answered
// with the recorded one and sets nothing. The record lives at least as long as each grant's TTL,
// and once it has expired (no permit held) another number may be used.
BOOST_AUTO_TEST_CASE(the_first_grant_records_the_permits_and_another_number_is_refused) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(try_slot(c, 3, 0, "a", false, "300").text == "OK");
  BOOST_TEST(c.command({"GET", semaphore_permits_key("jobs")}).text == "3");
  BOOST_TEST(pttl(c, semaphore_permits_key("jobs")) > 200);

  const auto disagreed = try_slot(c, 5, 1, "b");
  BOOST_TEST_REQUIRE(disagreed.elements.size() == 2u);
  BOOST_TEST(disagreed.elements[0].text == "permits");
  BOOST_TEST(disagreed.elements[1].text == "3");
  BOOST_TEST(c.command({"EXISTS", semaphore_slot_key("jobs", 1)}).integer == 0);

  // A longer grant of the same size lengthens the record; a shorter one leaves it.
  BOOST_TEST(try_slot(c, 3, 1, "c", false, "5000").text == "OK");
  BOOST_TEST(pttl(c, semaphore_permits_key("jobs")) > 4000);
  BOOST_TEST(try_slot(c, 3, 2, "d", false, "100").text == "OK");
  BOOST_TEST(pttl(c, semaphore_permits_key("jobs")) > 4000);

  c.command({"DEL", semaphore_slot_key("jobs", 0), semaphore_slot_key("jobs", 1),
             semaphore_slot_key("jobs", 2), semaphore_permits_key("jobs")});
  BOOST_TEST(try_slot(c, 5, 4, "e").text == "OK");
  BOOST_TEST(c.command({"GET", semaphore_permits_key("jobs")}).text == "5");
}

// A permit's extension keeps the record alive with it, without creating or shortening it.
BOOST_AUTO_TEST_CASE(extending_a_permit_extends_the_record_and_never_creates_it) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  const auto& extend = redlock::detail::extend_script();
  const auto slot = semaphore_slot_key("jobs", 0);
  const auto record = semaphore_permits_key("jobs");
  BOOST_TEST(try_slot(c, 2, 0, "a", false, "1000").text == "OK");
  BOOST_TEST(c.command({"EVAL", extend.source(), "2", slot, record, "a", "8000"}).integer == 1);
  BOOST_TEST(pttl(c, slot) > 7000);
  BOOST_TEST(pttl(c, record) > 7000);
  BOOST_TEST(c.command({"EVAL", extend.source(), "2", slot, record, "a", "500"}).integer == 1);
  BOOST_TEST(pttl(c, slot) <= 500);
  BOOST_TEST(pttl(c, record) > 7000, "never shortened");
  BOOST_TEST(c.command({"EVAL", extend.source(), "2", slot, record, "other", "9000"}).integer == 0);
  BOOST_TEST(pttl(c, record) <= 8000, "not extended by someone else's token");
  c.command({"DEL", record});
  BOOST_TEST(c.command({"EVAL", extend.source(), "2", slot, record, "a", "8000"}).integer == 1);
  BOOST_TEST(c.command({"EXISTS", record}).integer == 0, "never created");
}

BOOST_AUTO_TEST_SUITE_END()
