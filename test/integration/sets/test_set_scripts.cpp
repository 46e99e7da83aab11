// A set of locks' scripts on a real server: the set is granted only when every key is free and
// then wholly, a refusal says when the whole set is free at the latest, fencing counts each
// resource, and extension and release act only on keys that hold the set's token.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "support/eval_script.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace {

namespace d = redlock::detail;
using redlock::resp::type;
using redlock::resp::value;
using redlock::test::eval_script;

value acquire(sync_client& c, const std::vector<std::string>& set, const std::string& token,
              const std::string& ttl = "10000", bool fenced = false) {
  std::vector<std::string> keys = set;
  if (fenced) {
    for (const auto& resource : set)
      keys.push_back(d::fencing_counter_key(resource));
  }
  return eval_script(c, d::multi_acquire_script(), keys, {token, ttl, fenced ? "1" : "0"});
}

using redlock::test::granted;

std::string value_of(sync_client& c, const std::string& key) {
  const auto reply = c.command({"GET", key});
  return reply.is_null() ? std::string("(none)") : reply.text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(set_scripts)

BOOST_AUTO_TEST_CASE(a_set_is_granted_whole_only_when_every_key_is_free) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(acquire(c, {"a", "b", "c"}, "t1")));
  for (const std::string key : {"a", "b", "c"}) {
    BOOST_TEST(value_of(c, key) == "t1", key);
    const auto left = c.command({"PTTL", key}).integer;
    BOOST_TEST((left > 9000 && left <= 10000), key << ": " << left);
  }
  // One key of another set held: nothing of this one is set.
  const auto refused = acquire(c, {"c", "d"}, "t2");
  BOOST_TEST_REQUIRE((refused.kind == type::integer), redlock::resp::to_debug_string(refused));
  BOOST_TEST((refused.integer > 9000 && refused.integer <= 10000));
  BOOST_TEST(value_of(c, "d") == "(none)");
  BOOST_TEST(value_of(c, "c") == "t1");
  // A single lock's key is the same key: SET NX of "b" is refused, and a set with a lock's key.
  BOOST_TEST(c.command({"SET", "b", "single", "NX", "PX", "1000"}).is_null());
  BOOST_TEST(c.command({"SET", "e", "single", "NX", "PX", "30000"}).text == "OK");
  const auto behind_lock = acquire(c, {"d", "e"}, "t3");
  BOOST_TEST_REQUIRE((behind_lock.kind == type::integer));
  BOOST_TEST(behind_lock.integer > 20000);
  BOOST_TEST(value_of(c, "d") == "(none)");
}

BOOST_AUTO_TEST_CASE(a_refusal_is_the_longest_pttl_of_the_keys_that_block) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  c.command({"SET", "x", "other", "PX", "2000"});
  c.command({"SET", "z", "other", "PX", "8000"});
  const auto refused = acquire(c, {"x", "y", "z"}, "t");
  BOOST_TEST_REQUIRE((refused.kind == type::integer));
  BOOST_TEST((refused.integer > 7000 && refused.integer <= 8000), refused.integer);
  // A key without expiry: never free by itself.
  c.command({"SET", "y", "forever"});
  BOOST_TEST(acquire(c, {"x", "y", "z"}, "t").integer == -1);
  BOOST_TEST(value_of(c, "x") == "other");
}

BOOST_AUTO_TEST_CASE(fencing_increments_each_resources_counter) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  // "b" was fenced alone before: its counter is ahead of "a"'s.
  c.command({"SET", d::fencing_counter_key("b"), "41"});
  const auto first = acquire(c, {"a", "b"}, "t1", "10000", true);
  BOOST_TEST_REQUIRE((first.kind == type::array && first.elements.size() == 2u),
                     redlock::resp::to_debug_string(first));
  BOOST_TEST(first.elements[0].text == "1");  // counters come as text (exact beyond 2^53)
  BOOST_TEST(first.elements[1].text == "42");
  // Refused: no counter moves.
  const auto refused = acquire(c, {"b", "c"}, "t2", "10000", true);
  BOOST_TEST((refused.kind == type::integer));
  BOOST_TEST(value_of(c, d::fencing_counter_key("c")) == "(none)");
  BOOST_TEST(value_of(c, d::fencing_counter_key("b")) == "42");
}

BOOST_AUTO_TEST_CASE(an_extension_refreshes_every_key_or_none) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(acquire(c, {"a", "b"}, "t", "5000")));
  BOOST_TEST(eval_script(c, d::multi_extend_script(), {"a", "b"}, {"t", "60000"}).integer == 1);
  BOOST_TEST(c.command({"PTTL", "a"}).integer > 50000);
  BOOST_TEST(c.command({"PTTL", "b"}).integer > 50000);
  BOOST_TEST(eval_script(c, d::multi_extend_script(), {"a", "b"}, {"other", "90000"}).integer == 0);
  // "b" expired and taken by someone else: the set is not ours here, and "a" is not refreshed.
  c.command({"SET", "b", "someone", "PX", "1000"});
  BOOST_TEST(eval_script(c, d::multi_extend_script(), {"a", "b"}, {"t", "90000"}).integer == 0);
  BOOST_TEST(c.command({"PTTL", "a"}).integer <= 60000);
  BOOST_TEST(value_of(c, "b") == "someone");
}

BOOST_AUTO_TEST_CASE(a_release_deletes_the_keys_that_are_ours_and_announces_each) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  sync_client listener(server.port());
  BOOST_TEST_REQUIRE((listener.command({"SUBSCRIBE", "freed"}).kind == type::array));
  BOOST_TEST(granted(acquire(c, {"a", "b", "c"}, "t")));
  c.command({"SET", "c", "someone", "PX", "10000"});  // lost to another owner on this node
  const auto released =
      eval_script(c, d::multi_release_script(), {"a", "b", "c"}, {"t", "freed", ""});
  BOOST_TEST(released.integer == 0);  // not wholly ours
  BOOST_TEST(value_of(c, "a") == "(none)");
  BOOST_TEST(value_of(c, "b") == "(none)");
  BOOST_TEST(value_of(c, "c") == "someone");
  for (const std::string key : {"a", "b"}) {
    const auto message = listener.next_reply();
    BOOST_TEST_REQUIRE((message.kind == type::array && message.elements.size() == 3u));
    BOOST_TEST(message.elements[2].text == key);
  }
  BOOST_TEST(granted(acquire(c, {"a", "b"}, "u")));
  BOOST_TEST(eval_script(c, d::multi_release_script(), {"a", "b"}, {"u"}).integer == 1);
  BOOST_TEST(c.command({"EXISTS", "a", "b"}).integer == 0);
}

BOOST_AUTO_TEST_SUITE_END()
