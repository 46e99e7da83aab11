// status --read/--write NAME, without I/O: a node's answer to the read script taken apart (a reader
// counts only while its deadline, on the node's clock, is ahead), and the verdict on the lock.

#include "redlock/rw_status.hpp"
#include "resp/value.hpp"
#include "support/text_contains.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cli = redlock::cli;
namespace resp = redlock::resp;

using redlock::test::contains;

resp::value reply_of(resp::type kind, std::string text = {}) {
  resp::value reply;
  reply.kind = kind;
  reply.text = std::move(text);
  return reply;
}
resp::value integer(std::int64_t n) {
  auto reply = reply_of(resp::type::integer);
  reply.integer = n;
  return reply;
}
resp::value bulk(std::string text) {
  return reply_of(resp::type::bulk_string, std::move(text));
}
resp::value nil() {
  return {};
}
resp::value array(std::vector<resp::value> elements) {
  auto reply = reply_of(resp::type::array);
  reply.elements = std::move(elements);
  return reply;
}
resp::value error_reply(std::string text) {
  return reply_of(resp::type::simple_error, std::move(text));
}
resp::value wrongtype() {
  return error_reply("WRONGTYPE Operation against a key holding the wrong kind of value");
}

// {value, pttl} of the writer's key or the mark; no key: {nil, -2}.
resp::value entry(std::string token, std::int64_t pttl) {
  return array({bulk(std::move(token)), integer(pttl)});
}
resp::value no_entry() {
  return array({nil(), integer(-2)});
}

constexpr std::int64_t now = 1'700'000'000'000;

// The script's answer: {now, writer, readers (token, deadline, ...), mark}.
resp::value answer(resp::value writer, std::vector<resp::value> readers, resp::value mark) {
  return array({integer(now), std::move(writer), array(std::move(readers)), std::move(mark)});
}

const std::string writer_token = "aaaaaaaa11112222333344445555666677778888";
const std::string reader_a = "bbbbbbbb11112222333344445555666677778888";
const std::string reader_b = "cccccccc11112222333344445555666677778888";
const std::string mark_id = "dddddddd11112222333344445555666677778888";

// A node with the given live readers (each with 20 s left), and nothing else.
cli::rw_node_report reading(std::string address, std::vector<std::string> tokens) {
  cli::rw_node_report report;
  report.address = std::move(address);
  for (auto& token : tokens)
    report.readers.push_back({std::move(token), 20000});
  return report;
}

cli::rw_node_report writing(std::string address, std::string token = writer_token) {
  cli::rw_node_report report;
  report.address = std::move(address);
  report.writer = cli::rw_entry{std::move(token), 20000};
  return report;
}

cli::rw_node_report marked(cli::rw_node_report report) {
  report.mark = cli::rw_entry{mark_id, 20000};
  return report;
}

cli::rw_node_report rw_down(std::string address) {
  cli::rw_node_report report;
  report.address = std::move(address);
  report.error = "connect failed: Connection refused";
  return report;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rw_status)

BOOST_AUTO_TEST_CASE(the_keys_are_the_locks_and_a_key_names_its_lock) {
  BOOST_TEST(cli::rw_status_keys("catalog") ==
                 (std::vector<std::string>{"{catalog}:write", "{catalog}:read",
                                           "{catalog}:write-waiting"}),
             boost::test_tools::per_element());
  BOOST_TEST(cli::rw_lock_of_key("{catalog}:read").value_or("") == "catalog");
  BOOST_TEST(cli::rw_lock_of_key("{catalog}:write").value_or("") == "catalog");
  BOOST_TEST(cli::rw_lock_of_key("{catalog}:write-waiting").value_or("") == "catalog");
  BOOST_TEST(cli::rw_lock_of_key("{shop}cart:read").value_or("") == "{shop}cart");
  BOOST_TEST(!cli::rw_lock_of_key("catalog:read").has_value());
  BOOST_TEST(!cli::rw_lock_of_key("{catalog}:slot:0").has_value());
  // "{}" is no hash tag (an empty one counts as none), so that name keeps its braces.
  BOOST_TEST(cli::rw_lock_of_key("{}:read").value_or("") == "{}");
  BOOST_TEST(!cli::rw_lock_of_key(":read").has_value());
}

// A reader counts while its deadline is ahead of the node's clock; one at or past it is shown
// apart (the read changes nothing, so it is still there), and longest-left readers come first.
BOOST_AUTO_TEST_CASE(readers_count_only_until_their_deadline) {
  const auto report = cli::read_rw_node(
      "127.0.0.1:7000",
      answer(no_entry(),
             {bulk(reader_a), bulk(std::to_string(now - 5)), bulk("past"),
              bulk(std::to_string(now)), bulk(reader_b), bulk(std::to_string(now + 900)),
              bulk(writer_token), bulk("1.7000000300000000e+12")},
             entry(mark_id, 2500)));
  BOOST_TEST(!report.error.has_value(), report.error.value_or(""));
  BOOST_TEST_REQUIRE(report.readers.size() == 2u);
  BOOST_TEST(report.readers[0].token == writer_token);  // 30 s left, as a double score
  BOOST_TEST(report.readers[0].ttl_ms == 30000);
  BOOST_TEST(report.readers[1].token == reader_b);
  BOOST_TEST(report.readers[1].ttl_ms == 900);
  BOOST_TEST(report.expired_readers == 2u);
  BOOST_TEST(!report.writer.has_value());
  BOOST_TEST_REQUIRE(report.mark.has_value());
  BOOST_TEST(report.mark->token == mark_id);
  BOOST_TEST(report.mark->ttl_ms == 2500);
  BOOST_TEST(report.holds_anything());
  BOOST_TEST(cli::format_rw_node(report) ==
             "127.0.0.1:7000        reachable    readers 2: aaaaaaaa 30000 ms, cccccccc 900 ms; 2 "
             "readers past the deadline; waiting writer dddddddd ttl 2500 ms");
  BOOST_TEST(cli::json_of(report, 0, "catalog") ==
             "{\"type\":\"rw_node\",\"resource\":\"catalog\",\"index\":0,\"address\":"
             "\"127.0.0.1:7000\",\"state\":\"held\",\"writer\":null,\"writer_pttl_ms\":null,"
             "\"readers\":[\"" +
                 writer_token + "\",\"" + reader_b +
                 "\"],\"readers_left_ms\":[30000,900],\"expired_readers\":2,\"waiting_writer\":\"" +
                 mark_id +
                 "\",\"waiting_writer_pttl_ms\":2500,\"note\":null,\"error\":null,"
                 "\"subscribers\":null,\"link\":null}");

  // Only expired entries: nothing of the lock holds.
  const auto stale = cli::read_rw_node(
      "127.0.0.1:7000",
      answer(no_entry(), {bulk(reader_a), bulk(std::to_string(now - 1))}, no_entry()));
  BOOST_TEST(!stale.holds_anything());
  BOOST_TEST(cli::format_rw_node(stale) ==
             "127.0.0.1:7000        reachable    free  (1 reader past the deadline)");
}

BOOST_AUTO_TEST_CASE(a_writer_keys_of_another_type_and_odd_answers) {
  const auto writer = cli::read_rw_node("h:1", answer(entry(writer_token, 29000), {}, no_entry()));
  BOOST_TEST_REQUIRE(writer.writer.has_value());
  BOOST_TEST(writer.writer->ttl_ms == 29000);
  BOOST_TEST(cli::format_rw_node(writer) ==
             "h:1                   reachable    writer aaaaaaaa ttl 29000 ms");

  const auto other = cli::read_rw_node("h:1", answer(wrongtype(), {}, no_entry()));
  BOOST_TEST(!other.error.has_value());
  BOOST_TEST(other.holds_anything());
  BOOST_TEST(
      contains(cli::format_rw_node(other), "the writer's key holds a value of another type"));
  const auto other_readers =
      cli::read_rw_node("h:1", array({integer(now), no_entry(), wrongtype(), no_entry()}));
  BOOST_TEST(contains(cli::format_rw_node(other_readers), "the readers' key holds a value"));

  for (const auto& odd :
       {error_reply("NOSCRIPT no such script"), integer(1), array({integer(now), no_entry()}),
        answer(no_entry(), {bulk(reader_a)}, no_entry()),
        answer(no_entry(), {bulk(reader_a), bulk("soon")}, no_entry())}) {
    const auto report = cli::read_rw_node("h:1", odd);
    BOOST_TEST(report.error.has_value(), resp::to_debug_string(odd));
    BOOST_TEST(!report.holds_anything());
    BOOST_TEST(contains(cli::format_rw_node(report), "h:1                   unreachable  "));
    BOOST_TEST(contains(cli::json_of(report, 2, "x"),
                        "\"state\":\"unreachable\",\"writer\":null,\"writer_pttl_ms\":null,"
                        "\"readers\":null,\"readers_left_ms\":null,\"expired_readers\":null"));
  }
}

BOOST_AUTO_TEST_CASE(verdicts) {
  struct verdict_case {
    std::string_view name;
    std::vector<cli::rw_node_report> reports;
    std::string_view line;
    cli::rw_state state;
  };
  const std::vector<verdict_case> cases = {
      {"free",
       {reading("a:1", {}), reading("a:2", {}), reading("a:3", {})},
       "doc: writer on 0 of 3 nodes, readers on 0, waiting writer on 0 (quorum 2): free",
       cli::rw_state::free},
      {"write-locked",
       {writing("a:1"), writing("a:2"), reading("a:3", {})},
       "doc: writer on 2 of 3 nodes, readers on 0, waiting writer on 0 (quorum 2): write-locked "
       "(token aaaaaaaa)",
       cli::rw_state::write_locked},
      {"read-locked, one reader below quorum",
       {reading("a:1", {reader_a, reader_b}), reading("a:2", {reader_a}), reading("a:3", {})},
       "doc: writer on 0 of 3 nodes, readers on 2, waiting writer on 0 (quorum 2): read-locked by "
       "1 reader",
       cli::rw_state::read_locked},
      {"read-locked by two, and a writer waits",
       {marked(reading("a:1", {reader_a, reader_b})), marked(reading("a:2", {reader_a, reader_b})),
        reading("a:3", {})},
       "doc: writer on 0 of 3 nodes, readers on 2, waiting writer on 2 (quorum 2): read-locked by "
       "2 readers; a writer waits (mark dddddddd on a quorum): new readers are kept out",
       cli::rw_state::read_locked},
      {"below quorum",
       {writing("a:1"), reading("a:2", {reader_a}), reading("a:3", {})},
       "doc: writer on 1 of 3 nodes, readers on 1, waiting writer on 0 (quorum 2): not locked "
       "(below quorum)",
       cli::rw_state::not_locked},
      {"a node down could complete a reader's quorum",
       {reading("a:1", {reader_a}), reading("a:2", {}), rw_down("a:3")},
       "doc: writer on 0 of 3 nodes, readers on 1, waiting writer on 0 (quorum 2): unknown: the "
       "unreachable nodes could complete a quorum",
       cli::rw_state::unknown},
      {"too few nodes",
       {reading("a:1", {}), rw_down("a:2"), rw_down("a:3")},
       "doc: writer on 0 of 3 nodes, readers on 0, waiting writer on 0 (quorum 2): unknown: only 1 "
       "of 3 nodes reachable",
       cli::rw_state::unknown},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const auto verdict = cli::judge_rw("doc", c.reports);
      BOOST_TEST(verdict.line == c.line);
      BOOST_TEST((verdict.state == c.state));
    }
  }
  const std::vector<cli::rw_node_report> two_readers = {
      marked(reading("a:1", {reader_a, reader_b})), marked(reading("a:2", {reader_a, reader_b})),
      rw_down("a:3")};
  const auto verdict = cli::judge_rw("doc", two_readers);
  BOOST_TEST(verdict.counts == (std::vector<std::string>{"unreachable nodes: 1"}),
             boost::test_tools::per_element());
  BOOST_TEST(cli::json_of(verdict) ==
             "{\"type\":\"rw_verdict\",\"resource\":\"doc\",\"state\":\"read_locked\",\"writer\":"
             "null,\"readers\":[\"" +
                 reader_a + "\",\"" + reader_b + "\"],\"waiting_writer\":\"" + mark_id +
                 "\",\"nodes\":3,\"quorum\":2,\"answered\":2,\"unreachable\":1,"
                 "\"misconfigured\":0,\"writer_nodes\":0,\"reader_nodes\":2,"
                 "\"waiting_writer_nodes\":2,\"quorum_answered\":true}");
}

BOOST_AUTO_TEST_SUITE_END()
