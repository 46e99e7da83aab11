// What a sentinel node reads in the sentinels' answers, without a server: the master named by
// SENTINEL GET-MASTER-ADDR-BY-NAME, a +switch-master message, the record of SENTINEL MASTER (RESP2
// and RESP3); and which failed requests a node standing for several servers may send again.

#include "net/multiplexer.hpp"
#include "nodes/forwarded_request.hpp"
#include "nodes/sentinel/replies.hpp"
#include "redlock/error.hpp"
#include "resp/parser.hpp"
#include "unit/parse_reply.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <string_view>

using redlock::detail::cluster_endpoint;
using redlock::detail::read_master_answer;
using redlock::detail::read_master_record;
using redlock::detail::switched_to;
using namespace std::chrono_literals;

namespace {

std::string bulk_bytes(std::string_view text) {
  return "$" + std::to_string(text.size()) + "\r\n" + std::string(text) + "\r\n";
}

// A SENTINEL MASTER reply with these fields among others, as an array (RESP2) or a map (RESP3).
std::string master_entry(bool resp3, std::string_view ip, std::string_view port,
                         std::string_view reported_ms, std::string_view epoch) {
  const std::pair<std::string_view, std::string_view> fields[] = {
      {"name", "mymaster"},
      {"ip", ip},
      {"port", port},
      {"flags", "master"},
      {"role-reported", "master"},
      {"role-reported-time", reported_ms},
      {"config-epoch", epoch},
      {"quorum", "2"}};
  std::string out = resp3 ? "%" + std::to_string(std::size(fields)) + "\r\n"
                          : "*" + std::to_string(2 * std::size(fields)) + "\r\n";
  for (const auto& [name, value] : fields)
    out += bulk_bytes(name) + bulk_bytes(value);
  return out;
}

const cluster_endpoint master_6380{"127.0.0.1", 6380};

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel_replies)

BOOST_AUTO_TEST_CASE(the_master_named_is_read_and_every_other_answer_says_why_not) {
  const auto named = read_master_answer(
      redlock::test::parse_reply("*2\r\n" + bulk_bytes("127.0.0.1") + bulk_bytes("6380")),
      "127.0.0.1:26379", "mymaster");
  BOOST_TEST_REQUIRE(named.master.has_value());
  BOOST_TEST((*named.master == master_6380));
  BOOST_TEST(named.problem.empty());

  const auto v6 = read_master_answer(
      redlock::test::parse_reply("*2\r\n" + bulk_bytes("::1") + bulk_bytes("6380")), "s", "m");
  BOOST_TEST_REQUIRE(v6.master.has_value());
  BOOST_TEST(v6.master->host == "::1");

  // Nil: the sentinel watches no master of that name, which asking again does not change.
  const auto unknown =
      read_master_answer(redlock::test::parse_reply("$-1\r\n"), "127.0.0.1:26379", "other");
  BOOST_TEST(!unknown.master.has_value());
  BOOST_TEST(unknown.unknown_name);
  BOOST_TEST(unknown.problem == "127.0.0.1:26379 knows no master named \"other\"");
  BOOST_TEST(!read_master_answer(redlock::test::parse_reply("_\r\n"), "s", "m")
                  .master.has_value());  // RESP3 null

  const std::string unreadable[] = {"*1\r\n" + bulk_bytes("127.0.0.1"), "-ERR no such command\r\n",
                                    ":6380\r\n",
                                    "*2\r\n" + bulk_bytes("127.0.0.1") + bulk_bytes("port"),
                                    "*2\r\n" + bulk_bytes("127.0.0.1") + bulk_bytes("70000")};
  for (const std::string& bad : unreadable) {
    const auto answer =
        read_master_answer(redlock::test::parse_reply(bad), "127.0.0.1:26379", "mymaster");
    BOOST_TEST(!answer.master.has_value(), bad);
    BOOST_TEST(!answer.unknown_name, bad);
    BOOST_TEST(answer.problem.starts_with("127.0.0.1:26379 "), answer.problem);
  }
}

BOOST_AUTO_TEST_CASE(a_switch_is_followed_only_for_our_master_and_when_readable) {
  const auto moved = switched_to("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster");
  BOOST_TEST_REQUIRE(moved.has_value());
  BOOST_TEST((*moved == master_6380));
  BOOST_TEST(!switched_to("othermaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster").has_value());
  BOOST_TEST(!switched_to("mymaster 127.0.0.1 6379 127.0.0.1", "mymaster").has_value());
  BOOST_TEST(!switched_to("mymaster 127.0.0.1 6379 127.0.0.1 6380 extra", "mymaster"));
  BOOST_TEST(!switched_to("mymaster 127.0.0.1 6379 127.0.0.1 port", "mymaster").has_value());
  BOOST_TEST(!switched_to("", "mymaster").has_value());
  // A name is one word: a prefix is another group's.
  BOOST_TEST(!switched_to("my 127.0.0.1 6379 127.0.0.1 6380", "mymaster").has_value());
}

BOOST_AUTO_TEST_CASE(the_master_record_dates_the_switch_from_the_sentinels_clock_offset) {
  const auto now = std::chrono::system_clock::now();
  for (const bool resp3 : {false, true}) {
    const auto record = read_master_record(
        redlock::test::parse_reply(master_entry(resp3, "127.0.0.1", "6380", "12500", "3")),
        master_6380, now);
    BOOST_TEST_REQUIRE(record.has_value(), "resp3 " << resp3);
    BOOST_TEST((record->since == now - 12500ms));
    BOOST_TEST_REQUIRE(record->config_epoch.has_value());
    BOOST_TEST(*record->config_epoch == 3);
  }
  // Another address (the sentinel switched between the two answers): no record of ours.
  BOOST_TEST(!read_master_record(
      redlock::test::parse_reply(master_entry(false, "127.0.0.1", "6381", "5", "4")), master_6380,
      now));
  // No time, or one that is not a number: nothing; no epoch: the time alone.
  BOOST_TEST(!read_master_record(
      redlock::test::parse_reply(master_entry(false, "127.0.0.1", "6380", "soon", "1")),
      master_6380, now));
  BOOST_TEST(!read_master_record(
      redlock::test::parse_reply(master_entry(false, "127.0.0.1", "6380", "-5", "1")), master_6380,
      now));
  const auto no_epoch = read_master_record(
      redlock::test::parse_reply(master_entry(false, "127.0.0.1", "6380", "0", "x")), master_6380,
      now);
  BOOST_TEST_REQUIRE(no_epoch.has_value());
  BOOST_TEST(!no_epoch->config_epoch.has_value());
  BOOST_TEST(!read_master_record(
      redlock::test::parse_reply("-ERR No such master with that name\r\n"), master_6380, now));
  BOOST_TEST(!read_master_record(redlock::test::parse_reply("*3\r\n" + bulk_bytes("ip") +
                                                            bulk_bytes("x") + bulk_bytes("port")),
                                 master_6380, now));
}

// Sent again elsewhere (the master after a failover) only when that cannot run it twice to harm:
// unsent, or a token-checked cleanup whose link broke after it was written.
BOOST_AUTO_TEST_CASE(only_unsent_requests_and_broken_cleanups_are_sent_again) {
  using redlock::error;
  using redlock::detail::may_send_again;
  using redlock::detail::sent_nowhere;
  redlock::detail::request_options vote;
  vote.timeout = 100ms;
  redlock::detail::request_options cleanup = vote;
  cleanup.deliver_for = 5s;
  const auto code = [](error e) { return redlock::make_error_code(e); };

  for (const auto unsent : {code(error::not_connected), code(error::connect_timeout),
                            boost::system::error_code(boost::asio::error::connection_refused),
                            boost::system::error_code(boost::asio::error::host_not_found)}) {
    BOOST_TEST(sent_nowhere(unsent), unsent.message());
    BOOST_TEST(may_send_again(unsent, vote), unsent.message());
    BOOST_TEST(may_send_again(unsent, cleanup), unsent.message());
  }
  // Written, then the link broke: the SET may have run; only a cleanup goes again.
  BOOST_TEST(!sent_nowhere(code(error::connection_lost)));
  BOOST_TEST(!may_send_again(code(error::connection_lost), vote));
  BOOST_TEST(may_send_again(code(error::connection_lost), cleanup));
  // What another server would not cure, or an answer that may still come.
  for (const auto final_error :
       {code(error::auth_failed), code(error::certificate_rejected), code(error::request_timeout),
        code(error::node_unresponsive), code(error::server_error),
        boost::system::error_code(boost::asio::error::operation_aborted)}) {
    BOOST_TEST(!may_send_again(final_error, vote), final_error.message());
    BOOST_TEST(!may_send_again(final_error, cleanup), final_error.message());
  }
}

BOOST_AUTO_TEST_SUITE_END()
