#include "redlock/messages.hpp"

#include "redlock/error.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cli = redlock::cli;
using redlock::error;
using redlock::make_error_code;
using namespace std::chrono_literals;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Wait statuses as Linux encodes them.
constexpr int exited(int code) {
  return code << 8;
}
constexpr int killed(int signal) {
  return signal;
}

cli::node_report node(std::string address, bool held, std::string value = {}) {
  cli::node_report report;
  report.address = std::move(address);
  report.held = held;
  report.value = std::move(value);
  report.pttl_ms = held ? 1234 : -2;
  return report;
}

// A key of another type (a list, a hash): it exists, but holds nobody's token.
cli::node_report other_type(std::string address) {
  auto report = node(std::move(address), true);
  report.note = "not a lock key";
  return report;
}

cli::node_report down(std::string address) {
  cli::node_report report;
  report.address = std::move(address);
  report.error = "connect failed: Connection refused";
  return report;
}

const std::string token_a = "aaaaaaaa11112222333344445555666677778888";
const std::string token_b = "bbbbbbbb11112222333344445555666677778888";

}  // namespace

BOOST_AUTO_TEST_SUITE(messages)

BOOST_AUTO_TEST_CASE(one_line_drops_the_prefix_and_line_breaks) {
  BOOST_TEST(cli::one_line("redlock: \"x\" expired") == "\"x\" expired");
  BOOST_TEST(cli::one_line("ERR a\r\nb") == "ERR a  b");
}

BOOST_AUTO_TEST_CASE(acquire_failures_are_classified_by_their_last_round) {
  using cli::acquire_failure;
  BOOST_TEST((cli::classify_acquire_failure(error::contended, "") == acquire_failure::contended));
  BOOST_TEST((cli::classify_acquire_failure(error::no_quorum, "") == acquire_failure::no_quorum));
  BOOST_TEST(
      (cli::classify_acquire_failure(error::invalid_argument, "") == acquire_failure::invalid));
  BOOST_TEST((cli::classify_acquire_failure(make_error_code(std::errc::io_error), "") ==
              acquire_failure::other));

  const auto round = [](error outcome) {
    return "redlock: \"job\" not acquired (" + make_error_code(outcome).message() +
           "): 0 of 5 nodes granted";
  };
  BOOST_TEST((cli::classify_acquire_failure(error::wait_timeout, round(error::contended)) ==
              acquire_failure::contended));
  BOOST_TEST((cli::classify_acquire_failure(error::wait_timeout, round(error::no_quorum)) ==
              acquire_failure::no_quorum));
  BOOST_TEST((cli::classify_acquire_failure(error::wait_timeout, round(error::validity_expired)) ==
              acquire_failure::validity_expired));
  BOOST_TEST(
      (cli::classify_acquire_failure(error::wait_timeout, "") == acquire_failure::wait_timeout));

  const auto line = cli::not_acquired_message("job", 300ms, error::wait_timeout,
                                              round(error::contended) + "\nsecond line");
  BOOST_TEST(line.starts_with("redlock: \"job\" not acquired within 300 ms: contended"), line);
  BOOST_TEST(!contains(line, "\n"));
  BOOST_TEST(contains(cli::not_acquired_message("job", 300ms, error::no_quorum, ""), "no quorum"));
}

BOOST_AUTO_TEST_CASE(wait_statuses_as_a_shell_reports_them) {
  BOOST_TEST(cli::exit_code_of(exited(0)) == 0);
  BOOST_TEST(cli::exit_code_of(exited(3)) == 3);
  BOOST_TEST(cli::exit_code_of(killed(SIGTERM)) == 128 + SIGTERM);
  BOOST_TEST(cli::exit_code_of(killed(SIGKILL)) == 128 + SIGKILL);
  BOOST_TEST(cli::describe_wait_status(exited(3)) == "exited with code 3");
  BOOST_TEST(cli::describe_wait_status(killed(SIGTERM)) == "was killed by SIGTERM");
  BOOST_TEST(cli::signal_name(SIGINT) == "SIGINT");
}

BOOST_AUTO_TEST_CASE(node_lines) {
  BOOST_TEST(cli::token_prefix(token_a) == "aaaaaaaa");
  BOOST_TEST(cli::token_prefix(std::string("a\nb c")) == "a?b?c");

  const auto held = cli::format_node_report(node("127.0.0.1:7001", true, token_a));
  BOOST_TEST(held.starts_with("127.0.0.1:7001"));
  BOOST_TEST(contains(held, "reachable    held  ttl 1234 ms  token aaaaaaaa"), held);
  BOOST_TEST(contains(cli::format_node_report(node("127.0.0.1:7001", false)), "reachable    free"));
  auto forever = node("127.0.0.1:7003", true, "tok");
  forever.pttl_ms = -1;
  BOOST_TEST(contains(cli::format_node_report(forever), "held  no ttl  token tok"));
  BOOST_TEST(cli::format_node_report(other_type("127.0.0.1:7004")) ==
             "127.0.0.1:7004        reachable    held  not a lock key");
  const auto unreachable = cli::format_node_report(down("127.0.0.1:7002"));
  BOOST_TEST(contains(unreachable, "unreachable  connect failed: Connection refused"), unreachable);
}

BOOST_AUTO_TEST_CASE(verdicts) {
  struct verdict_case {
    std::string_view name;
    std::vector<cli::node_report> reports;
    std::string_view line;
    bool enough;
  };
  const std::vector<verdict_case> cases = {
      {"free",
       {node("a:1", false), node("a:2", false), node("a:3", false), node("a:4", false),
        node("a:5", false)},
       "job: held on 0 of 5 nodes (quorum 3): free",
       true},
      {"locked",
       {node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", true, token_a),
        node("a:4", false), node("a:5", false)},
       "job: held on 3 of 5 nodes (quorum 3): locked (token aaaaaaaa)",
       true},
      {"locked with two nodes down",
       {node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", true, token_a),
        down("a:4"), down("a:5")},
       "job: held on 3 of 5 nodes (quorum 3): locked (token aaaaaaaa)",
       true},
      {"below quorum",
       {node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", false),
        node("a:4", false), node("a:5", false)},
       "job: held on 2 of 5 nodes (quorum 3): not locked (below quorum)",
       true},
      {"split between owners",
       {node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", true, token_b),
        node("a:4", true, token_b), node("a:5", false)},
       "job: held on 4 of 5 nodes (quorum 3): not locked (below quorum, split between 2 owners)",
       true},
      {"unreachable nodes could complete a quorum",
       {node("a:1", true, token_a), node("a:2", false), node("a:3", false), down("a:4"),
        down("a:5")},
       "job: held on 1 of 5 nodes (quorum 3): unknown: the unreachable nodes could complete a "
       "quorum",
       true},
      {"free although two nodes are down",
       {node("a:1", false), node("a:2", false), node("a:3", false), down("a:4"), down("a:5")},
       "job: held on 0 of 5 nodes (quorum 3): free",
       true},
      {"a key of another type holds no token",
       {node("a:1", true, token_a), node("a:2", true, token_a), other_type("a:3"),
        node("a:4", false), node("a:5", false)},
       "job: held on 3 of 5 nodes (quorum 3): not locked (below quorum)",
       true},
      {"too few nodes reachable",
       {node("a:1", false), node("a:2", false), down("a:3"), down("a:4"), down("a:5")},
       "job: held on 0 of 5 nodes (quorum 3): unknown: only 2 of 5 nodes reachable",
       false},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const auto verdict = cli::judge_status("job", c.reports);
      BOOST_TEST(verdict.line == c.line);
      BOOST_TEST(verdict.enough_reachable == c.enough);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
