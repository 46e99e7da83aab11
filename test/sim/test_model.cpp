// The model server on its own, without a network: the library's scripts run on it as on Redis,
// keys expire on the clock it is given (and only then), a flushed script cache answers NOSCRIPT,
// errors carry Redis's code words, a publication reaches the subscribed connections, a replica
// refuses writes and a sentinel follows a failover, and replies travel as the RESP the library
// parses. (How closely it matches a real server is
// model_conformance's business, in the integration suite.)

#include "algo/hash_slot.hpp"
#include "lock/scripts.hpp"
#include "resp/parser.hpp"
#include "sim/model/server.hpp"

#define BOOST_TEST_MODULE redlock_sim_model_tests
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace {

namespace resp = redlock::resp;
using redlock::sim::model_server;
using namespace redlock::detail;

constexpr std::int64_t start_us = 1'700'000'000'000'000;

resp::value run(model_server& server, std::vector<std::string> args,
                std::int64_t now_us = start_us) {
  return server.execute(nullptr, args, now_us);
}

std::vector<std::string> evalsha(const script& s, std::vector<std::string> keys,
                                 std::vector<std::string> args) {
  std::vector<std::string> c{"EVALSHA", s.sha1(), std::to_string(keys.size())};
  c.insert(c.end(), keys.begin(), keys.end());
  c.insert(c.end(), args.begin(), args.end());
  return c;
}

// Every reply and pushed message in what a connection received.
std::vector<resp::value> replies_in(const std::string& bytes) {
  resp::parser parser;
  parser.feed(bytes);
  boost::system::error_code ec;
  std::vector<resp::value> got;
  while (auto v = parser.next(ec))
    got.push_back(std::move(*v));
  return got;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sim_model)

BOOST_AUTO_TEST_CASE(the_lock_scripts_grant_refuse_and_release_by_token) {
  model_server server("n0");
  for (const script* s : {&acquire_script(), &release_script(), &fenced_acquire_script()}) {
    BOOST_TEST(run(server, {"SCRIPT", "LOAD", s->source()}).text == s->sha1());
  }
  auto granted = run(server, evalsha(acquire_script(), {"r"}, {"tokA", "1000"}));
  BOOST_TEST((granted.kind == resp::type::simple_string && granted.text == "OK"));
  auto refused =
      run(server, evalsha(acquire_script(), {"r"}, {"tokB", "1000"}), start_us + 300'000);
  BOOST_TEST((refused.kind == resp::type::integer && refused.integer == 700));
  auto foreign = run(server, evalsha(release_script(), {"r"}, {"tokB"}));
  BOOST_TEST(foreign.integer == 0);
  BOOST_TEST(run(server, {"GET", "r"}).text == "tokA");
  auto released = run(server, evalsha(release_script(), {"r"}, {"tokA"}));
  BOOST_TEST(released.integer == 1);
  BOOST_TEST(run(server, {"EXISTS", "r"}).integer == 0);

  auto fenced = run(server, evalsha(fenced_acquire_script(), {"r", "r:fence"}, {"tokC", "500"}));
  BOOST_TEST_REQUIRE(fenced.elements.size() == 1u);
  BOOST_TEST(fenced.elements[0].text == "1");
}

BOOST_AUTO_TEST_CASE(keys_expire_on_the_clock_given_and_not_before) {
  model_server server("n0");
  BOOST_TEST(run(server, {"SET", "k", "v", "NX", "PX", "100"}).text == "OK");
  BOOST_TEST(run(server, {"PTTL", "k"}, start_us + 40'000).integer == 60);
  // Alive while now == expiry, as in Redis; gone one millisecond later.
  BOOST_TEST(run(server, {"GET", "k"}, start_us + 100'000).text == "v");
  BOOST_TEST(run(server, {"GET", "k"}, start_us + 101'000).is_null());
  BOOST_TEST(run(server, {"PTTL", "k"}, start_us + 101'000).integer == -2);
}

BOOST_AUTO_TEST_CASE(a_flushed_cache_answers_noscript_until_the_script_is_loaded_again) {
  model_server server("n0");
  run(server, {"SCRIPT", "LOAD", release_script().source()});
  BOOST_TEST(run(server, evalsha(release_script(), {"r"}, {"t"})).integer == 0);
  server.scripts().flush();
  auto missing = run(server, evalsha(release_script(), {"r"}, {"t"}));
  BOOST_TEST(missing.error_code_word() == "NOSCRIPT");
  run(server, {"EVAL", release_script().source(), "1", "r", "t"});
  BOOST_TEST(run(server, evalsha(release_script(), {"r"}, {"t"})).integer == 0);
}

BOOST_AUTO_TEST_CASE(errors_carry_redis_code_words) {
  model_server server("n0");
  run(server, {"ZADD", "z", "1", "m"});
  BOOST_TEST(run(server, {"GET", "z"}).error_code_word() == "WRONGTYPE");
  BOOST_TEST(run(server, {"SET", "k", "v", "PX", "0"}).text ==
             "ERR invalid expire time in 'set' command");
  BOOST_TEST(run(server, {"INCR", "z"}).error_code_word() == "WRONGTYPE");
  auto from_script = run(server, {"EVAL", "return redis.call('GET', KEYS[1])", "1", "z"});
  BOOST_TEST(from_script.error_code_word() == "WRONGTYPE");
  auto global = run(server, {"EVAL", "undefined_name = 1", "0"});
  BOOST_TEST(global.error_code_word() == "ERR");
  BOOST_TEST(global.text.find("Script attempted to create global variable") != std::string::npos);
  auto looping = run(server, {"EVAL", "while true do end", "0"});
  BOOST_TEST(looping.is_error());
}

BOOST_AUTO_TEST_CASE(a_release_is_announced_to_the_subscribed_connections) {
  model_server server("n0");
  std::string subscriber_bytes;
  auto& subscriber = server.open([&](std::string bytes) { subscriber_bytes += bytes; });
  subscriber.receive("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", start_us);
  subscriber.receive("*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nchan\r\n", start_us);
  run(server, {"SET", "r", "tokA"});
  auto deleted = run(server, {"EVAL", release_script().source(), "1", "r", "tokA", "chan"});
  BOOST_TEST(deleted.integer == 1);

  const auto got = replies_in(subscriber_bytes);
  BOOST_TEST_REQUIRE(got.size() == 3u);  // HELLO's map, the subscription, the message
  BOOST_TEST((got[0].kind == resp::type::map));
  BOOST_TEST((got[1].kind == resp::type::push && got[1].elements[0].text == "subscribe"));
  BOOST_TEST((got[2].kind == resp::type::push && got[2].elements[0].text == "message"));
  BOOST_TEST(got[2].elements[2].text == "r");
  server.close(subscriber);
}

BOOST_AUTO_TEST_CASE(a_failover_turns_the_master_replica_and_the_sentinel_announces_it) {
  model_server master("n0");
  model_server sentinel("s0", redlock::sim::server_role::sentinel);
  sentinel.monitor("m0", "n0", 7000, start_us);
  std::string subscriber_bytes;
  auto& subscriber = sentinel.open([&](std::string bytes) { subscriber_bytes += bytes; });
  subscriber.receive("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", start_us);
  subscriber.receive("*2\r\n$9\r\nSUBSCRIBE\r\n$14\r\n+switch-master\r\n", start_us);

  BOOST_TEST(run(master, {"SET", "r", "tokA"}).text == "OK");
  master.become_replica_of("n0r", 7100);
  auto refused = run(master, {"SET", "r", "tokB"});
  BOOST_TEST(refused.error_code_word() == "READONLY");
  auto from_script = run(master, {"EVAL", release_script().source(), "1", "r", "tokA"});
  BOOST_TEST(from_script.error_code_word() == "READONLY");
  BOOST_TEST(run(master, {"GET", "r"}).text == "tokA");  // reads still answer
  BOOST_TEST(run(master, {"ROLE"}).elements.at(0).text == "slave");
  BOOST_TEST(run(sentinel, {"SET", "r", "x"}).error_code_word() == "ERR");  // no keys there

  sentinel.switch_master("m0", "n0r", 7100, start_us + 5'000);
  auto named = run(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m0"});
  BOOST_TEST_REQUIRE(named.elements.size() == 2u);
  BOOST_TEST(named.elements[0].text == "n0r");
  BOOST_TEST(named.elements[1].text == "7100");
  BOOST_TEST(run(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m9"}).is_null());

  const auto got = replies_in(subscriber_bytes);
  BOOST_TEST_REQUIRE(got.size() == 3u);  // HELLO's map, the subscription, the announcement
  BOOST_TEST(got[2].elements.at(2).text == "m0 n0 7000 n0r 7100");
  sentinel.close(subscriber);
}

BOOST_AUTO_TEST_CASE(a_cluster_master_redirects_and_a_moved_slot_unsubscribes_its_channels) {
  auto map = std::make_shared<redlock::sim::cluster_map>();
  map->shards.push_back({"a", 7000, std::string(40, 'a'), {{0, 8191}}});
  map->shards.push_back({"b", 7001, std::string(40, 'b'), {{8192, 16383}}});
  model_server a("a");
  a.join_cluster(map, "a", 7000);
  const std::uint16_t slot = redlock::detail::hash_slot("r");
  const bool ours = slot <= 8191;
  const std::string key = ours ? "r" : "x";  // whichever of the two hashes to shard a
  BOOST_TEST_REQUIRE(redlock::detail::hash_slot(key) <= 8191);
  BOOST_TEST(run(a, {"SET", key, "tokA"}).text == "OK");
  BOOST_TEST(run(a, {"DEL", key, "{other}"}).error_code_word() == "CROSSSLOT");

  std::string subscriber_bytes;
  auto& subscriber = a.open([&](std::string bytes) { subscriber_bytes += bytes; });
  subscriber.receive("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", start_us);
  subscriber.receive(fmt::format("*2\r\n$10\r\nSSUBSCRIBE\r\n${}\r\n{}\r\n", key.size(), key),
                     start_us);
  const std::uint16_t key_slot = redlock::detail::hash_slot(key);
  map->move_slot(key_slot, 1);
  a.slot_moved_away(key_slot);
  const auto moved = run(a, {"GET", key});
  BOOST_TEST(moved.text == fmt::format("MOVED {} b:7001", key_slot));
  const auto got = replies_in(subscriber_bytes);
  BOOST_TEST_REQUIRE(got.size() == 3u);  // HELLO's map, the subscription, the unsubscription
  BOOST_TEST(got[2].elements.at(0).text == "sunsubscribe");
  BOOST_TEST(map->owner_of(key_slot)->port == 7001);
  BOOST_TEST(map->owner_of(static_cast<std::uint16_t>(key_slot == 0 ? 1 : key_slot - 1))->port ==
             7000);
  a.close(subscriber);
}

BOOST_AUTO_TEST_SUITE_END()
