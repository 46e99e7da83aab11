// The vote behind every fan-out: decided once per ballot at the first answer its rule accepts,
// late answers of an earlier ballot ignored, kept alive exactly while requests may still answer;
// and how a reply becomes a node's answer (failed unsent or not, with which code).

#include "ops/vote.hpp"
#include "support/printing.hpp"
#include "unit/resp_values.hpp"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace redlock::detail {
// For Boost.Test's messages.
std::ostream& boost_test_print_type(std::ostream& out, node_answer::kind kind) {
  constexpr const char* names[] = {"pending", "yes", "no", "failed"};
  return out << names[static_cast<int>(kind)];
}
}  // namespace redlock::detail

namespace {
namespace rd = redlock::detail;
using boost::system::error_code;

// Yes for "+OK", no for a null reply, failed otherwise. Whether the outcome is certain is the
// test's `rule`, not any operation's: these tests are about when the vote asks and what it does
// with the answer. Records every decision.
class test_vote final : public rd::vote, public std::enable_shared_from_this<test_vote> {
 public:
  using rule_type = std::function<std::optional<error_code>(const rd::tally&)>;

  test_vote(std::size_t nodes, rule_type rule)
      : vote(nodes, rd::vote_replies::own), rule_(std::move(rule)) {}

  std::size_t next_ballot() { return open_ballot(); }

  std::vector<error_code> outcomes;

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }

  rd::node_answer::kind classify(const error_code& ec, const redlock::resp::value& reply,
                                 std::string& detail) override {
    if (ec) {
      detail = "transport";
      return rd::node_answer::kind::failed;
    }
    if (reply.kind == redlock::resp::type::simple_string) return rd::node_answer::kind::yes;
    if (reply.is_null()) return rd::node_answer::kind::no;
    return rd::node_answer::kind::failed;
  }

  std::optional<error_code> decide(const rd::tally& t) override { return rule_(t); }

  void decided(error_code outcome) override { outcomes.push_back(outcome); }

  rule_type rule_;
};

// A vote of token-checked scripts: its replies are read as classify_script_reply reads them.
class script_vote final : public rd::vote, public std::enable_shared_from_this<script_vote> {
 public:
  explicit script_vote(std::size_t nodes) : vote(nodes, rd::vote_replies::token_script) {}

  std::size_t next_ballot() { return open_ballot(); }

  std::vector<error_code> outcomes;

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }
  std::optional<error_code> decide(const rd::tally& t) override {
    if (t.complete()) return error_code{};
    return std::nullopt;
  }
  void decided(error_code outcome) override { outcomes.push_back(outcome); }
};

// Decides once `yes` nodes said yes (success) or `no` nodes said no (error::not_held).
test_vote::rule_type at_count(std::size_t yes, std::size_t no) {
  return [yes, no](const rd::tally& t) -> std::optional<error_code> {
    if (t.yes_count() >= yes) return error_code{};
    if (t.no_count() >= no) return make_error_code(redlock::error::not_held);
    return std::nullopt;
  };
}

using redlock::test::reply::integer;
using redlock::test::reply::ok;

redlock::resp::value null() {
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(vote)

BOOST_AUTO_TEST_CASE(decides_once_at_the_first_answer_the_rule_accepts) {
  auto v = std::make_shared<test_vote>(5, at_count(3, 3));
  const std::size_t first = v->next_ballot();
  v->on_reply(first + 0, {}, ok());
  v->on_reply(first + 3, {}, null());
  v->on_reply(first + 1, {}, ok());
  BOOST_TEST(v->outcomes.empty());
  v->on_reply(first + 4, {}, ok());
  BOOST_REQUIRE(v->outcomes.size() == 1u);
  BOOST_TEST(!v->outcomes.front());
  // The last node still answers; the outcome stands.
  v->on_reply(first + 2, {}, null());
  BOOST_TEST(v->outcomes.size() == 1u);
  BOOST_TEST(v->votes().no_count() == 2u);
  BOOST_TEST(v->answers()[2].what == rd::node_answer::kind::no);
}

BOOST_AUTO_TEST_CASE(late_answers_of_an_earlier_ballot_are_ignored) {
  auto v = std::make_shared<test_vote>(3, at_count(2, 2));
  const std::size_t first = v->next_ballot();
  v->on_reply(first + 0, {}, null());
  v->on_reply(first + 1, {}, null());
  BOOST_REQUIRE(v->outcomes.size() == 1u);
  BOOST_TEST(v->outcomes.back() == redlock::error::not_held);

  const std::size_t second = v->next_ballot();
  BOOST_TEST(second != first);
  BOOST_TEST(v->votes().pending() == 3u);
  // Node 2's answer to the first ballot arrives during the second: it must not count.
  v->on_reply(first + 2, {}, ok());
  BOOST_TEST(v->votes().pending() == 3u);
  v->on_reply(second + 0, {}, ok());
  v->on_reply(second + 2, boost::asio::error::operation_aborted, null());
  BOOST_TEST(v->answers()[2].what == rd::node_answer::kind::failed);
  BOOST_TEST(v->answers()[2].detail == "transport");
  v->on_reply(second + 1, {}, ok());
  BOOST_REQUIRE(v->outcomes.size() == 2u);
  BOOST_TEST(!v->outcomes.back());
}

// Each reply of a token script's vote is the answer classify_script_reply and make_answer make
// of it, also where a node's answer in the ballot before carried a text.
BOOST_AUTO_TEST_CASE(a_token_script_vote_reads_replies_as_classify_script_reply_does) {
  redlock::resp::value error_reply;
  error_reply.kind = redlock::resp::type::simple_error;
  error_reply.text = "NOPERM no permissions";
  struct {
    error_code ec;
    redlock::resp::value reply;
  } const cases[] = {{{}, integer(1)},
                     {{}, integer(0)},
                     {{}, integer(2)},
                     {{}, ok()},
                     {{}, null()},
                     {{}, error_reply},
                     {redlock::error::not_connected, null()},
                     {redlock::error::connection_lost, null()}};
  auto v = std::make_shared<script_vote>(std::size(cases));
  for (int ballot = 0; ballot < 2; ++ballot) {
    // The second ballot asks in the other order: each node's answer before it differs.
    const std::size_t tag = v->next_ballot();
    for (std::size_t i = 0; i < std::size(cases); ++i) {
      const std::size_t node = ballot == 0 ? i : std::size(cases) - 1 - i;
      v->on_reply(tag + node, cases[i].ec, cases[i].reply);
    }
    for (std::size_t i = 0; i < std::size(cases); ++i) {
      const std::size_t node = ballot == 0 ? i : std::size(cases) - 1 - i;
      BOOST_TEST_CONTEXT("ballot " << ballot << ", case " << i) {
        std::string detail;
        const auto what = rd::classify_script_reply(cases[i].ec, cases[i].reply, detail);
        const auto expected = rd::make_answer(what, cases[i].ec, cases[i].reply, detail);
        const auto& answer = v->answers()[node];
        BOOST_TEST((answer.what == expected.what));
        BOOST_TEST(answer.unsent == expected.unsent);
        BOOST_TEST(answer.failure == expected.failure);
        BOOST_TEST(answer.detail == expected.detail);
      }
    }
  }
  BOOST_TEST(v->outcomes.size() == 2u);
  BOOST_TEST(v->votes().yes_count() == 1u);
  BOOST_TEST(v->votes().no_count() == 2u);  // 0 and 2: any integer but 1 is a no
}

BOOST_AUTO_TEST_CASE(stays_alive_while_requests_may_answer) {
  auto v = std::make_shared<test_vote>(2, at_count(2, 2));
  std::weak_ptr<test_vote> watch = v;
  {
    rd::sink_ref first_request(v.get());
    rd::sink_ref second_request(first_request);
    v.reset();  // the operation lets go; the requests still hold it
    BOOST_TEST(!watch.expired());
    first_request.reset();
    BOOST_TEST(!watch.expired());
  }
  BOOST_TEST(watch.expired());
}

// Unsent: nothing on the node can need undoing, so no cleanup is sent there.
BOOST_AUTO_TEST_CASE(answers_failed_unsent) {
  using redlock::error;
  struct {
    error_code ec;
    bool unsent;
  } const cases[] = {
      {error::not_connected, true},
      {error::node_unresponsive, true},
      {error::auth_failed, true},  // a connection failing for good refuses requests unsent
      {error::select_failed, true},
      {error::invalid_argument, true},  // refused as a duplicate node
      {error::connection_lost, false},
      {error::request_timeout, false},
      {boost::asio::error::operation_aborted, false},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.ec.message()) {
      const auto answer = rd::make_answer(rd::node_answer::kind::failed, c.ec, null(), "text");
      BOOST_TEST(answer.unsent == c.unsent);
      BOOST_TEST(answer.failure == c.ec);
      BOOST_TEST(answer.detail == "text");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_error_reply_is_a_written_failure) {
  using redlock::error;
  struct {
    const char* reply;
    error failure;
  } const cases[] = {
      {"NOPERM this user has no permissions to access the 'lock' key", error::permission_denied},
      {"ERR something else", error::server_error},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.reply) {
      redlock::resp::value reply;
      reply.kind = redlock::resp::type::simple_error;
      reply.text = c.reply;
      const auto answer = rd::make_answer(rd::node_answer::kind::failed, {}, reply, reply.text);
      BOOST_TEST(answer.failure == c.failure);
      BOOST_TEST(!answer.unsent);
    }
  }
  const auto granted = rd::make_answer(rd::node_answer::kind::yes, {}, ok(), "");
  BOOST_TEST(!granted.failure);
  BOOST_TEST(!granted.unsent);
}

BOOST_AUTO_TEST_SUITE_END()
