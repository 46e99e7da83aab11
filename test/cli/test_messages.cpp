#include "redlock/error.hpp"
#include "redlock/exit_codes.hpp"
#include "redlock/messages.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <signal.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
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

// Reached, but its ACL user may not run what the lock needs.
cli::node_report misconfigured(std::string address) {
  cli::node_report report;
  report.address = std::move(address);
  report.error = "permission denied: ACL user \"bob\" may not run EVALSHA, which the lock needs";
  report.misconfigured = true;
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

BOOST_AUTO_TEST_CASE(misconfigured_nodes_are_neither_retried_nor_a_conflict) {
  using cli::acquire_failure;
  for (const auto e : {error::auth_failed, error::select_failed, error::permission_denied,
                       error::protocol_error}) {
    BOOST_TEST_CONTEXT(make_error_code(e).message()) {
      BOOST_TEST((cli::classify_acquire_failure(e, "") == acquire_failure::misconfigured));
      BOOST_TEST(cli::not_acquired_exit_code(e, "", 3) == cli::exit_code::failure);
    }
  }
  const std::string diagnostics =
      "redlock: \"job\" not acquired (the node's ACL user may not run a command the lock needs): "
      "0 of 3 nodes granted, quorum 2, round took 1 ms; not retried: ...: 127.0.0.1:7001 failing "
      "(ACL user \"bob\" may not run EVALSHA, which the lock needs (NOPERM ...))";
  const auto line =
      cli::not_acquired_message("job", 10000ms, error::permission_denied, diagnostics);
  BOOST_TEST(line.starts_with("redlock: \"job\" not acquired: misconfigured nodes, not retried; "
                              "last attempt: \"job\" not acquired"),
             line);
  BOOST_TEST(contains(line, "may not run EVALSHA"), line);

  // Two URLs of one server: the library refuses to lock; retrying would not change that.
  const std::string duplicate = "redlock: \"job\" not acquired: a:1 and b:1 reach one server";
  BOOST_TEST(cli::not_acquired_exit_code(error::invalid_argument, duplicate, 3) ==
             cli::exit_code::failure);
  const auto refused = cli::not_acquired_message("job", 0ms, error::invalid_argument, duplicate);
  BOOST_TEST(refused.starts_with("redlock: \"job\" not acquired: refused, not retried; "), refused);
  BOOST_TEST(contains(refused, "reach one server"), refused);
}

BOOST_AUTO_TEST_CASE(conflict_exit_code_covers_other_owners_only) {
  const auto round = [](error outcome) {
    return "redlock: \"job\" not acquired (" + make_error_code(outcome).message() +
           "): 0 of 5 nodes granted";
  };
  // Held elsewhere: at once (--wait 0) or when the wait ran out.
  BOOST_TEST(cli::not_acquired_exit_code(error::contended, round(error::contended), 3) == 3);
  BOOST_TEST(cli::not_acquired_exit_code(error::wait_timeout, round(error::contended), 3) == 3);
  BOOST_TEST(cli::not_acquired_exit_code(error::wait_timeout, "", 0) == 0);
  BOOST_TEST(cli::not_acquired_exit_code(error::contended, "", cli::exit_code::not_acquired) ==
             cli::exit_code::not_acquired);
  // Nodes down or too slow is not somebody else's lock: a conflict code meaning "skip quietly"
  // must not hide it.
  BOOST_TEST(cli::not_acquired_exit_code(error::no_quorum, round(error::no_quorum), 3) ==
             cli::exit_code::not_acquired);
  BOOST_TEST(cli::not_acquired_exit_code(error::wait_timeout, round(error::no_quorum), 3) ==
             cli::exit_code::not_acquired);
  BOOST_TEST(cli::not_acquired_exit_code(error::validity_expired, "", 3) ==
             cli::exit_code::not_acquired);
  BOOST_TEST(cli::not_acquired_exit_code(make_error_code(std::errc::io_error), "", 3) ==
             cli::exit_code::failure);
  // --wait 0 fails with the round's own code: no "within N ms".
  const auto once =
      cli::not_acquired_message("job", 0ms, error::contended, round(error::contended));
  BOOST_TEST(once.starts_with("redlock: \"job\" not acquired: contended: held by another owner"),
             once);
  // A semaphore is contended when every permit is held; the rest of the line is the same.
  const auto full =
      cli::not_acquired_message("jobs", 0ms, error::contended, round(error::contended), 4);
  BOOST_TEST(full.starts_with(
                 "redlock: \"jobs\" not acquired: contended: all 4 permits held by other owners"),
             full);
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
  BOOST_TEST(cli::format_node_report(misconfigured("127.0.0.1:7005")) ==
             "127.0.0.1:7005        misconfigured permission denied: ACL user \"bob\" may not run "
             "EVALSHA, which the lock needs");
  // How a node was reached, when not plain TCP, ends its line.
  auto over_tls = node("127.0.0.1:7006", false);
  over_tls.link = "tls, verified as localhost";
  BOOST_TEST(cli::format_node_report(over_tls) ==
             "127.0.0.1:7006        reachable    free  (tls, verified as localhost)");
  auto local = down("unix:/run/redis.sock");
  local.link = "unix socket";
  BOOST_TEST(cli::format_node_report(local).ends_with("  (unix socket)"));
  auto watched = node("127.0.0.1:7008", false);
  watched.subscribers = 2;
  watched.link = "unix socket";
  BOOST_TEST(cli::format_node_report(watched) ==
             "127.0.0.1:7008        reachable    free  subscribers 2  (unix socket)");
}

BOOST_AUTO_TEST_CASE(node_failure_reasons) {
  BOOST_TEST(
      cli::node_failure_reason(error::permission_denied,
                               "ACL user \"bob\" may not run EVALSHA, which the lock needs "
                               "(NOPERM User bob has no permissions)") ==
      "permission denied: ACL user \"bob\" may not run EVALSHA, which the lock needs (NOPERM "
      "User bob has no permissions)");
  // The others say what they are already.
  BOOST_TEST(
      cli::node_failure_reason(error::auth_failed, "cannot log in: AUTH refused (WRONGPASS)") ==
      "cannot log in: AUTH refused (WRONGPASS)");
  BOOST_TEST(cli::node_failure_reason(error::select_failed, "cannot select database 99: x\ny") ==
             "cannot select database 99: x y");
  // No text: the code's own message.
  BOOST_TEST(cli::node_failure_reason(error::auth_failed, "") ==
             make_error_code(error::auth_failed).message());
  BOOST_TEST(cli::node_failure_reason(error::permission_denied, "") ==
             "permission denied: " + make_error_code(error::permission_denied).message());
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

// status --permits: each slot judged as a lock, then summed up; the counts of nodes that could
// not be asked are told once, not per slot.
BOOST_AUTO_TEST_CASE(semaphore_summary) {
  const std::vector<cli::node_report> locked = {node("a:1", true, token_a),
                                                node("a:2", true, token_a), node("a:3", false)};
  const std::vector<cli::node_report> below = {node("a:1", true, token_b), node("a:2", false),
                                               node("a:3", false)};
  const std::vector<cli::node_report> free = {node("a:1", false), node("a:2", false),
                                              node("a:3", false)};
  const std::vector<cli::status_verdict> slots = {cli::judge_status("{s}:slot:0", locked),
                                                  cli::judge_status("{s}:slot:1", below),
                                                  cli::judge_status("{s}:slot:2", free)};
  BOOST_TEST((slots[0].state == cli::lock_state::locked));
  BOOST_TEST((slots[1].state == cli::lock_state::not_locked));
  BOOST_TEST((slots[2].state == cli::lock_state::free));
  const auto summary = cli::judge_semaphore("s", slots);
  BOOST_TEST(summary.line == "s: 1 of 3 permits held (quorum 2 of 3 nodes)");
  BOOST_TEST(summary.held == 1u);
  BOOST_TEST(summary.unknown == 0u);
  BOOST_TEST(summary.enough_reachable);
  BOOST_TEST(summary.counts.empty());

  // One node down: a slot held on one node could be held on a quorum with it.
  const std::vector<cli::node_report> maybe = {node("a:1", true, token_a), node("a:2", false),
                                               down("a:3")};
  const std::vector<cli::node_report> held = {node("a:1", true, token_b),
                                              node("a:2", true, token_b), down("a:3")};
  const std::vector<cli::status_verdict> degraded = {cli::judge_status("{s}:slot:0", maybe),
                                                     cli::judge_status("{s}:slot:1", held)};
  const auto partly = cli::judge_semaphore("s", degraded);
  BOOST_TEST(partly.line == "s: 1 of 2 permits held (quorum 2 of 3 nodes), 1 unknown");
  BOOST_TEST(partly.enough_reachable);
  BOOST_TEST(partly.counts == (std::vector<std::string>{"unreachable nodes: 1"}),
             boost::test_tools::per_element());

  const std::vector<cli::node_report> lonely = {node("a:1", false), down("a:2"), down("a:3")};
  const std::vector<cli::status_verdict> cut_off = {cli::judge_status("{s}:slot:0", lonely)};
  const auto unknown = cli::judge_semaphore("s", cut_off);
  BOOST_TEST(unknown.line == "s: 0 of 1 permits held (quorum 2 of 3 nodes), 1 unknown");
  BOOST_TEST(!unknown.enough_reachable);
}

BOOST_AUTO_TEST_CASE(misconfigured_nodes_are_counted_apart_from_unreachable_ones) {
  struct verdict_case {
    std::string_view name;
    std::vector<cli::node_report> reports;
    std::string_view line;
    std::vector<std::string> counts;
    bool enough;
  };
  const std::string misconfigured_count =
      " (the lock cannot use them until their configuration is fixed)";
  const std::vector<verdict_case> cases = {
      {"all well",
       {node("a:1", false), node("a:2", false), node("a:3", false)},
       "job: held on 0 of 3 nodes (quorum 2): free",
       {},
       true},
      {"one unreachable",
       {node("a:1", false), node("a:2", false), down("a:3")},
       "job: held on 0 of 3 nodes (quorum 2): free",
       {"unreachable nodes: 1"},
       true},
      {"one misconfigured",
       {node("a:1", false), node("a:2", false), misconfigured("a:3")},
       "job: held on 0 of 3 nodes (quorum 2): free",
       {"misconfigured nodes: 1" + misconfigured_count},
       true},
      {"every node misconfigured",
       {misconfigured("a:1"), misconfigured("a:2"), misconfigured("a:3")},
       "job: held on 0 of 3 nodes (quorum 2): unknown: only 0 of 3 nodes usable (3 misconfigured)",
       {"misconfigured nodes: 3" + misconfigured_count},
       false},
      {"one of each, too few left",
       {node("a:1", false), node("a:2", false), misconfigured("a:3"), down("a:4")},
       "job: held on 0 of 4 nodes (quorum 3): unknown: only 2 of 4 nodes usable (1 misconfigured)",
       {"unreachable nodes: 1", "misconfigured nodes: 1" + misconfigured_count},
       false},
      // A node that refuses our credentials may hold a key another client set with the right ones.
      {"misconfigured nodes could complete a quorum",
       {node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", false),
        misconfigured("a:4"), node("a:5", false)},
       "job: held on 2 of 5 nodes (quorum 3): unknown: the misconfigured nodes could complete a "
       "quorum",
       {"misconfigured nodes: 1" + misconfigured_count},
       true},
      {"unreachable and misconfigured nodes could complete a quorum",
       {node("a:1", true, token_a), node("a:2", false), node("a:3", false), down("a:4"),
        misconfigured("a:5")},
       "job: held on 1 of 5 nodes (quorum 3): unknown: the unreachable and misconfigured nodes "
       "could complete a quorum",
       {"unreachable nodes: 1", "misconfigured nodes: 1" + misconfigured_count},
       true},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const auto verdict = cli::judge_status("job", c.reports);
      BOOST_TEST(verdict.line == c.line);
      BOOST_TEST(verdict.counts == c.counts, boost::test_tools::per_element());
      BOOST_TEST(verdict.enough_reachable == c.enough);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
