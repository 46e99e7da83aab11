// release --force decided without I/O: the holders found on the nodes, the question, the record.

#include "cli/sample_tokens.hpp"
#include "redlock/error.hpp"
#include "redlock/exit_codes.hpp"
#include "redlock/force_release.hpp"
#include "redlock/inspection.hpp"
#include "support/text_contains.hpp"

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cli = redlock::cli;
using redlock::error;
using redlock::make_error_code;

using redlock::test::sample_tokens::token_a;
using redlock::test::sample_tokens::token_b;
using redlock::test::sample_tokens::token_c;

redlock::node_holding holding(std::string address, std::optional<std::string> holder) {
  redlock::node_holding node;
  node.address = std::move(address);
  node.holder = std::move(holder);
  return node;
}

redlock::node_holding not_a_lock(std::string address) {
  auto node = holding(std::move(address), std::nullopt);
  node.not_a_lock = true;
  return node;
}

redlock::node_holding silent(std::string address) {
  auto node = holding(address, std::nullopt);
  node.error = make_error_code(error::request_timeout);
  node.error_text = address + ": no answer within 100 ms";
  return node;
}

redlock::inspection inspected(std::vector<redlock::node_holding> nodes) {
  redlock::inspection seen;
  seen.resource = "job";
  seen.quorum = nodes.size() / 2 + 1;
  seen.nodes = std::move(nodes);
  return seen;
}

using redlock::test::contains;

}  // namespace

BOOST_AUTO_TEST_SUITE(force_release)

// Every distinct token is a holder to release, the one on the most nodes first; keys that are no
// lock and nodes that were not asked are set apart.
BOOST_AUTO_TEST_CASE(the_plan_lists_every_holder_by_its_nodes) {
  const auto plan = cli::plan_force_release(inspected(
      {holding("a:1", token_b), holding("a:2", token_a), holding("a:3", token_a), not_a_lock("a:4"),
       silent("a:5"), holding("a:6", std::nullopt), holding("a:7", token_c)}));
  BOOST_TEST(plan.resource == "job");
  BOOST_TEST(plan.nodes == 7u);
  BOOST_TEST(plan.quorum == 4u);
  BOOST_TEST(plan.answered == 6u);
  BOOST_TEST_REQUIRE(plan.holders.size() == 3u);
  BOOST_TEST(plan.holders[0].token == token_a);
  BOOST_TEST(plan.holders[0].nodes == (std::vector<std::string>{"a:2", "a:3"}),
             boost::test_tools::per_element());
  // Holders on as many nodes keep the order in which the nodes were listed.
  BOOST_TEST(plan.holders[1].token == token_b);
  BOOST_TEST(plan.holders[2].token == token_c);
  BOOST_TEST(plan.holders[2].nodes == (std::vector<std::string>{"a:7"}),
             boost::test_tools::per_element());
  BOOST_TEST(plan.not_a_lock == (std::vector<std::string>{"a:4"}),
             boost::test_tools::per_element());
  BOOST_TEST(plan.silent == (std::vector<std::string>{"a:5: no answer within 100 ms"}),
             boost::test_tools::per_element());

  const auto nobody = cli::plan_force_release(
      inspected({holding("a:1", std::nullopt), not_a_lock("a:2"), holding("a:3", std::nullopt)}));
  BOOST_TEST(nobody.holders.empty());
  BOOST_TEST(nobody.answered == 3u);
  BOOST_TEST(cli::force_release_exit_code(nobody, {}) == cli::exit_code::not_held);
}

BOOST_AUTO_TEST_CASE(the_question_names_each_holder_and_only_yes_confirms) {
  const auto one = cli::plan_force_release(
      inspected({holding("a:1", token_a), holding("a:2", token_a), holding("a:3", token_a),
                 holding("a:4", std::nullopt), silent("a:5")}));
  BOOST_TEST(cli::confirmation_question(one) ==
             "release job held by aaaaaaaa on 3 of 5 nodes? [y/N] ");
  const auto two = cli::plan_force_release(
      inspected({holding("a:1", token_a), holding("a:2", token_a), holding("a:3", token_b)}));
  BOOST_TEST(cli::confirmation_question(two) ==
             "release job held by aaaaaaaa on 2 of 3 nodes and by bbbbbbbb on 1 of 3 nodes? "
             "[y/N] ");

  for (const std::string_view yes : {"y", "Y", "yes", "YES", "Yes", " yes \n", "y\r\n"}) {
    BOOST_TEST_CONTEXT("answer \"" << yes << "\"") {
      BOOST_TEST(cli::confirms(yes));
    }
  }
  for (const std::string_view no : {"", "\n", "n", "no", "N", "ye", "yess", "y y", "sure"}) {
    BOOST_TEST_CONTEXT("answer \"" << no << "\"") {
      BOOST_TEST(!cli::confirms(no));
    }
  }
}

// The record names who, where, what and how each release ended, the tokens in full.
BOOST_AUTO_TEST_CASE(the_record_names_the_user_the_host_the_tokens_and_their_nodes) {
  const auto plan = cli::plan_force_release(
      inspected({holding("a:1", token_a), holding("a:2", token_a), holding("a:3", token_b),
                 not_a_lock("a:4"), silent("a:5")}));
  const std::vector<redlock::error_code> outcomes = {{}, make_error_code(error::no_quorum)};
  const auto line = cli::audit_line("alice as root", "build-7", plan, outcomes);
  BOOST_TEST(line == "alice as root on build-7 released \"job\" by force: token " + token_a +
                         " on a:1,a:2 (released); token " + token_b +
                         " on a:3 (not released: " + make_error_code(error::no_quorum).message() +
                         "); not a lock, left alone on a:4",
             line);
  BOOST_TEST(!contains(line, "\n"));
  // A holder the quorum no longer knows is gone where it was: released all the same.
  const std::vector<redlock::error_code> gone = {make_error_code(error::not_held), {}};
  BOOST_TEST(contains(cli::audit_line("bob", "h", plan, gone), "on a:1,a:2 (released)"));
}

BOOST_AUTO_TEST_CASE(exit_codes_and_released_tokens) {
  const auto plan = cli::plan_force_release(
      inspected({holding("a:1", token_a), holding("a:2", token_a), holding("a:3", token_b)}));
  using codes = std::vector<redlock::error_code>;
  const auto not_held = make_error_code(error::not_held);
  const auto no_quorum = make_error_code(error::no_quorum);
  const auto lost = make_error_code(error::connection_lost);
  BOOST_TEST(cli::force_release_exit_code(plan, codes{{}, {}}) == 0);
  BOOST_TEST(cli::force_release_exit_code(plan, codes{{}, not_held}) == 0);
  BOOST_TEST(cli::force_release_exit_code(plan, codes{no_quorum, {}}) ==
             cli::exit_code::not_acquired);
  BOOST_TEST(cli::force_release_exit_code(plan, codes{no_quorum, lost}) == cli::exit_code::failure);
  BOOST_TEST(cli::released_tokens(plan, codes{{}, not_held}) ==
                 (std::vector<std::string>{token_a, token_b}),
             boost::test_tools::per_element());
  BOOST_TEST(
      cli::released_tokens(plan, codes{no_quorum, {}}) == (std::vector<std::string>{token_b}),
      boost::test_tools::per_element());

  const std::vector<std::string> tokens = {token_a};
  BOOST_TEST(
      cli::json_of_force_release("released", "job", 0, "alice on h released", tokens, "alice", "h")
          .str() == R"({"event":"released","resource":"job","exit_code":0,)"
                    R"("message":"alice on h released","tokens":[")" +
                        token_a + R"("],"user":"alice","host":"h"})");
}

BOOST_AUTO_TEST_SUITE_END()
