// Reading a lock as its nodes show it (client::async_inspect): each node's answer to the read
// script as a holding per key, and the verdict over the nodes: held on a quorum, free, held by no
// one with a quorum, or unknown while silent nodes could complete one.

#include "algo/inspection.hpp"
#include "redlock/error.hpp"
#include "unit/resp_values.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rd = redlock::detail;
namespace resp = redlock::resp;
using boost::system::error_code;
using redlock::inspection;
using redlock::node_holding;
using std::chrono::milliseconds;
using verdict = redlock::inspection::verdict;

namespace {

using redlock::test::reply::array;
using redlock::test::reply::bulk;
using redlock::test::reply::error_reply;
using redlock::test::reply::integer;
using redlock::test::reply::nil;

resp::value pair(resp::value value, std::int64_t pttl) {
  return array({std::move(value), integer(pttl)});
}

node_holding held(std::string token, std::optional<std::int64_t> ttl = 5000) {
  node_holding h;
  h.address = "n";
  h.holder = std::move(token);
  if (ttl) h.ttl = milliseconds(*ttl);
  return h;
}
node_holding empty() {
  node_holding h;
  h.address = "n";
  return h;
}
node_holding silent() {
  node_holding h;
  h.address = "n";
  h.error = redlock::error::request_timeout;
  return h;
}
node_holding wrong_type() {
  node_holding h = held("", std::nullopt);
  h.not_a_lock = true;
  return h;
}

inspection judged(std::vector<node_holding> nodes) {
  inspection seen;
  seen.resource = "r";
  seen.quorum = nodes.size() / 2 + 1;
  seen.nodes = std::move(nodes);
  rd::judge(seen);
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(inspection_verdict)

BOOST_AUTO_TEST_CASE(a_token_on_a_quorum_is_held_for_its_quorum_th_longest_ttl) {
  const auto seen = judged({held("a", 900), held("a", 300), empty(), held("a", 600), silent()});
  BOOST_TEST((seen.state == verdict::held));
  BOOST_TEST(*seen.holder == "a");
  // On 3 nodes: for at least 300 ms on all three of them.
  BOOST_TEST(seen.held_for->count() == 300);
  BOOST_TEST(seen.held_by("a"));
  BOOST_TEST(!seen.held_by("b"));
  BOOST_TEST(seen.nodes_holding("a") == 3u);
  BOOST_TEST(seen.answered() == 4u);
}

BOOST_AUTO_TEST_CASE(a_key_without_expiry_counts_as_the_longest) {
  const auto longest = judged({held("a", std::nullopt), held("a", 400), held("a", 100)});
  BOOST_TEST(longest.held_for->count() == 400);
  const auto forever = judged({held("a", std::nullopt), held("a", std::nullopt), held("a", 100)});
  BOOST_TEST((forever.state == verdict::held));
  BOOST_TEST(!forever.held_for.has_value());
}

BOOST_AUTO_TEST_CASE(free_only_when_the_silent_nodes_cannot_make_a_quorum) {
  BOOST_TEST((judged({empty(), empty(), empty()}).state == verdict::free));
  BOOST_TEST((judged({empty(), empty(), silent()}).state == verdict::free));
  BOOST_TEST((judged({empty(), silent(), silent()}).state == verdict::unknown));
  BOOST_TEST((judged({silent(), silent(), silent()}).state == verdict::unknown));
}

BOOST_AUTO_TEST_CASE(keys_without_a_quorum_are_not_held_unless_silent_nodes_could_complete_it) {
  // Leftovers of two rival rounds: nobody can have 3 of 5.
  BOOST_TEST(
      (judged({held("a"), held("b"), empty(), empty(), empty()}).state == verdict::not_held));
  // Two of five, and two silent nodes: "a" may hold 4.
  BOOST_TEST(
      (judged({held("a"), held("a"), empty(), silent(), silent()}).state == verdict::unknown));
  // Two of five, one silent: at most 3 — a quorum is possible.
  BOOST_TEST(
      (judged({held("a"), held("a"), empty(), empty(), silent()}).state == verdict::unknown));
  BOOST_TEST((judged({held("a"), empty(), empty(), empty(), silent()}).state == verdict::not_held));
}

BOOST_AUTO_TEST_CASE(a_key_that_is_not_a_string_blocks_but_holds_no_token) {
  const auto seen = judged({wrong_type(), empty(), empty()});
  BOOST_TEST((seen.state == verdict::not_held));
  BOOST_TEST(!seen.holder.has_value());
  BOOST_TEST((judged({wrong_type(), wrong_type(), wrong_type()}).state == verdict::not_held));
}

BOOST_AUTO_TEST_CASE(verdict_names) {
  BOOST_TEST(redlock::to_string(verdict::held) == "held");
  BOOST_TEST(redlock::to_string(verdict::free) == "free");
  BOOST_TEST(redlock::to_string(verdict::not_held) == "not_held");
  BOOST_TEST(redlock::to_string(verdict::unknown) == "unknown");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inspection_replies)

BOOST_AUTO_TEST_CASE(a_pair_per_key_gives_token_and_ttl) {
  const auto reply = array({pair(bulk("tok"), 1234), pair(nil(), -2), pair(bulk("x"), -1)});
  const auto holdings = rd::read_holdings("127.0.0.1:7000", {}, reply, 3);
  BOOST_TEST_REQUIRE(holdings.size() == 3u);
  BOOST_TEST(*holdings[0].holder == "tok");
  BOOST_TEST(holdings[0].ttl->count() == 1234);
  BOOST_TEST(holdings[0].address == "127.0.0.1:7000");
  BOOST_TEST(!holdings[1].holder.has_value());
  BOOST_TEST(!holdings[1].ttl.has_value());
  BOOST_TEST(holdings[1].answered());
  BOOST_TEST(*holdings[2].holder == "x");
  BOOST_TEST(!holdings[2].ttl.has_value(), "no expiry");
}

BOOST_AUTO_TEST_CASE(wrongtype_in_place_of_a_pair_is_a_key_that_is_not_a_lock) {
  const auto reply =
      array({error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")});
  const auto holdings = rd::read_holdings("n:1", {}, reply, 1);
  BOOST_TEST(holdings[0].not_a_lock);
  BOOST_TEST(holdings[0].answered());
}

BOOST_AUTO_TEST_CASE(a_failed_request_fails_every_key_with_its_text) {
  resp::value failure = error_reply("127.0.0.1:7000: connect failed: Connection refused");
  const auto holdings =
      rd::read_holdings("127.0.0.1:7000", redlock::error::not_connected, failure, 2);
  BOOST_TEST_REQUIRE(holdings.size() == 2u);
  for (const auto& h : holdings) {
    BOOST_TEST((h.error == redlock::error::not_connected));
    BOOST_TEST(h.error_text == "127.0.0.1:7000: connect failed: Connection refused");
  }
}

BOOST_AUTO_TEST_CASE(a_reply_of_another_shape_is_a_failure_naming_the_node) {
  const auto whole = rd::read_holdings("n:1", {}, error_reply("NOPERM no EVAL for you"), 2);
  BOOST_TEST((whole[0].error == redlock::error::server_error));
  BOOST_TEST(whole[0].error_text.find("n:1") != std::string::npos);
  BOOST_TEST(whole[1].error_text.find("NOPERM") != std::string::npos);
  const auto odd = rd::read_holdings("n:1", {}, array({integer(1)}), 1);
  BOOST_TEST((odd[0].error == redlock::error::protocol_error));
}

BOOST_AUTO_TEST_SUITE_END()
