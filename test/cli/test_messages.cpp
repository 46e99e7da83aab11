#include "cli/sample_tokens.hpp"
#include "redlock/error.hpp"
#include "redlock/exit_codes.hpp"
#include "redlock/inspection.hpp"
#include "redlock/json_line.hpp"
#include "redlock/messages.hpp"
#include "redlock/set_status.hpp"
#include "support/text_contains.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
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

using redlock::test::contains;

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

using redlock::test::sample_tokens::token_a;
using redlock::test::sample_tokens::token_b;

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
      {"values of another type on a quorum",
       {other_type("a:1"), other_type("a:2"), other_type("a:3"), node("a:4", false),
        node("a:5", false)},
       "job: held on 3 of 5 nodes (quorum 3): not a lock (a value of another type is on a quorum "
       "of nodes: no lock can be taken under this name)",
       true},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const auto verdict = cli::judge_status("job", c.reports);
      BOOST_TEST(verdict.line == c.line);
      BOOST_TEST(verdict.enough_reachable == c.enough);
    }
  }
}

// A read-write lock's readers' key is a sorted set: on one node of one it is held, not "not locked
// (below quorum)", and status says which lock it belongs to. The other keys of that lock too.
BOOST_AUTO_TEST_CASE(a_read_write_locks_key_is_named_as_such) {
  const std::vector<cli::node_report> readers = {other_type("a:1")};
  const auto verdict = cli::judge_status("{catalog}:read", readers);
  BOOST_TEST(verdict.line ==
             "{catalog}:read: held on 1 of 1 nodes (quorum 1): not a lock (a value "
             "of another type is on a quorum of nodes: no lock can be taken under "
             "this name)");
  BOOST_TEST((verdict.state == cli::lock_state::not_a_lock));
  BOOST_TEST(verdict.hint ==
             "\"{catalog}:read\" is a key of the read-write lock \"catalog\": "
             "redlock status --read catalog shows its writer, readers and waiting "
             "writer");
  BOOST_TEST(contains(cli::json_of(verdict), "\"state\":\"not_a_lock\""));
  BOOST_TEST(contains(cli::json_of(verdict), "\"hint\":\"\\\"{catalog}:read\\\" is a key"));
  const std::vector<cli::node_report> writer = {node("a:1", true, token_a)};
  BOOST_TEST(contains(cli::judge_status("{catalog}:write", writer).hint, "\"catalog\""));
  BOOST_TEST(contains(cli::judge_status("{catalog}:write-waiting", writer).hint, "\"catalog\""));
  // A name with a hash tag of its own keeps it; the hint quotes it for the shell.
  BOOST_TEST(contains(cli::judge_status("{shop}cart:read", writer).hint,
                      "redlock status --read '{shop}cart' shows"));
  BOOST_TEST(cli::judge_status("job", writer).hint.empty());
  BOOST_TEST(cli::judge_status("catalog:read", writer).hint.empty());
  BOOST_TEST(contains(cli::json_of(cli::judge_status("job", writer)), "\"hint\":null"));
}

// status A B: each resource judged as a lock, then the set: how many are locked and by whom.
BOOST_AUTO_TEST_CASE(set_summary) {
  const std::vector<cli::node_report> by_a = {node("a:1", true, token_a),
                                              node("a:2", true, token_a), node("a:3", false)};
  const std::vector<cli::node_report> by_b = {node("a:1", true, token_b),
                                              node("a:2", true, token_b), down("a:3")};
  const std::vector<cli::node_report> free = {node("a:1", false), node("a:2", false),
                                              node("a:3", false)};
  const std::vector<cli::status_verdict> one_lease = {cli::judge_status("x", by_a),
                                                      cli::judge_status("y", by_a)};
  const auto held = cli::judge_set("x and y", one_lease);
  BOOST_TEST(held.line == "x and y: 2 of 2 locked by token aaaaaaaa (quorum 2 of 3 nodes)");
  BOOST_TEST(held.owner.value_or("") == token_a);
  BOOST_TEST(held.enough_reachable);
  BOOST_TEST(cli::json_of(held) ==
             "{\"type\":\"set\",\"resources\":[\"x\",\"y\"],\"states\":[\"locked\",\"locked\"],"
             "\"locked\":2,\"free\":0,\"unknown\":0,\"token\":\"" +
                 token_a +
                 "\",\"nodes\":3,\"quorum\":2,\"unreachable\":0,\"misconfigured\":0,"
                 "\"quorum_answered\":true}");

  const std::vector<cli::status_verdict> mixed = {cli::judge_status("x", by_a),
                                                  cli::judge_status("y", free)};
  BOOST_TEST(cli::judge_set("x and y", mixed).line ==
             "x and y: 1 of 2 locked by token aaaaaaaa, 1 free (quorum 2 of 3 nodes)");
  const std::vector<cli::status_verdict> two_owners = {
      cli::judge_status("x", by_a), cli::judge_status("y", by_b), cli::judge_status("z", free)};
  const auto split = cli::judge_set("x, y and z", two_owners);
  BOOST_TEST(split.line == "x, y and z: 2 of 3 locked by 2 owners, 1 free (quorum 2 of 3 nodes)");
  BOOST_TEST(!split.owner.has_value());
  BOOST_TEST(contains(cli::json_of(split), "\"token\":null"));
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

// --json: the same facts as the text, as one JSON object per line. Strings come from outside
// (resource names, tokens, node error texts), so whatever their bytes, the line is valid JSON.
BOOST_AUTO_TEST_SUITE(json_output)

BOOST_AUTO_TEST_CASE(json_strings_escape_quotes_backslashes_and_control_characters) {
  BOOST_TEST(cli::json_string("") == R"("")");
  BOOST_TEST(cli::json_string("job:42") == R"("job:42")");
  BOOST_TEST(cli::json_string(R"(say "hi" \o/)") == R"("say \"hi\" \\o/")");
  BOOST_TEST(cli::json_string("a\nb\tc\rd") == R"("a\nb\tc\rd")");
  BOOST_TEST(cli::json_string(std::string_view("\0\x01\x1f", 3)) == R"("\u0000\u0001\u001f")");
  // DEL and '/' need no escape.
  BOOST_TEST(cli::json_string("\x7f/") == "\"\x7f/\"");
}

BOOST_AUTO_TEST_CASE(json_strings_keep_utf8_and_replace_what_is_not) {
  const std::string fffd = "\xEF\xBF\xBD";
  struct utf8_case {
    std::string_view name;
    std::string text;
    std::string json;
  };
  const std::vector<utf8_case> cases = {
      {"two-byte", "caf\xC3\xA9", "\"caf\xC3\xA9\""},
      {"three-byte", "\xE2\x82\xAC 5", "\"\xE2\x82\xAC 5\""},
      {"four-byte", "\xF0\x9F\x94\x92", "\"\xF0\x9F\x94\x92\""},
      {"highest code point", "\xF4\x8F\xBF\xBF", "\"\xF4\x8F\xBF\xBF\""},
      {"stray continuation byte", "a\x80z", "\"a" + fffd + "z\""},
      {"byte that starts nothing", "\xFF", "\"" + fffd + "\""},
      // One replacement for the cut-off sequence, not one per byte.
      {"cut off at the end", "x\xE2\x82", "\"x" + fffd + "\""},
      {"cut off by ASCII", "\xF0\x9F\x94z", "\"" + fffd + "z\""},
      // Forms that decode to something but are ill-formed: each byte is replaced.
      {"overlong two-byte", "\xC0\xAF", "\"" + fffd + fffd + "\""},
      {"overlong three-byte", "\xE0\x80\xAF", "\"" + fffd + fffd + fffd + "\""},
      {"surrogate", "\xED\xA0\x80", "\"" + fffd + fffd + fffd + "\""},
      {"beyond U+10FFFF", "\xF4\x90\x80\x80", "\"" + fffd + fffd + fffd + fffd + "\""},
      // A replacement does not swallow what follows, even a valid sequence.
      {"valid after invalid", "\xC3\xC3\xA9", "\"" + fffd + "\xC3\xA9\""},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      BOOST_TEST(cli::json_string(c.text) == c.json);
    }
  }
}

BOOST_AUTO_TEST_CASE(json_lines_are_flat_objects_in_the_order_of_their_fields) {
  BOOST_TEST(cli::json_line().str() == "{}");
  const std::vector<std::string> names = {"a", "b\"c"};
  const std::optional<long long> none;
  const auto line = cli::json_line()
                        .string("type", "node")
                        .integer("index", 0)
                        .integer("pttl_ms", -1LL)
                        .integer("big", std::uint64_t{18446744073709551615u})
                        .boolean("yes", true)
                        .boolean("no", false)
                        .null("nothing")
                        .strings("names", names)
                        .strings("empty", {})
                        .optional_string("error", std::nullopt)
                        .optional_string("note", std::string("x"))
                        .optional_integer("subscribers", none)
                        .optional_integer("permit", std::optional<std::size_t>(2))
                        .str();
  BOOST_TEST(line ==
             R"({"type":"node","index":0,"pttl_ms":-1,"big":18446744073709551615,"yes":true,)"
             R"("no":false,"nothing":null,"names":["a","b\"c"],"empty":[],"error":null,)"
             R"("note":"x","subscribers":null,"permit":2})");
}

BOOST_AUTO_TEST_CASE(node_objects) {
  auto held = node("127.0.0.1:7001", true, token_a);
  held.subscribers = 1;
  BOOST_TEST(cli::json_of(held, 0, "job") ==
             R"({"type":"node","resource":"job","index":0,"address":"127.0.0.1:7001",)"
             R"("state":"held","token":")" +
                 token_a +
                 R"(","pttl_ms":1234,"note":null,"error":null,"subscribers":1,"link":null})");

  auto free = node("127.0.0.1:7002", false);
  free.link = "tls, verified as localhost";
  BOOST_TEST(cli::json_of(free, 1, "job") ==
             R"({"type":"node","resource":"job","index":1,"address":"127.0.0.1:7002",)"
             R"("state":"free","token":null,"pttl_ms":null,"note":null,"error":null,)"
             R"("subscribers":null,"link":"tls, verified as localhost"})");

  // A key of another type is held, but by no token.
  const auto other = cli::json_of(other_type("127.0.0.1:7003"), 2, "job");
  BOOST_TEST(
      contains(other, R"("state":"held","token":null,"pttl_ms":null,"note":"not a lock key")"),
      other);

  auto unreachable = down("127.0.0.1:7004");
  unreachable.subscribers = 0;  // not shown by the text either: the node was not asked
  BOOST_TEST(cli::json_of(unreachable, 3, "job") ==
             R"({"type":"node","resource":"job","index":3,"address":"127.0.0.1:7004",)"
             R"("state":"unreachable","token":null,"pttl_ms":null,"note":null,)"
             R"("error":"connect failed: Connection refused","subscribers":null,"link":null})");
  const auto refused = cli::json_of(misconfigured("127.0.0.1:7005"), 4, "job");
  BOOST_TEST(contains(refused, R"("state":"misconfigured")"), refused);
  BOOST_TEST(contains(refused, R"("error":"permission denied: ACL user \"bob\" may not run )"),
             refused);

  // Whatever bytes a token or a name has, they arrive escaped.
  const auto odd = cli::json_of(node("a:1", true, "t\"\n\xFF"), 0, "j\\b");
  BOOST_TEST(contains(odd, R"("resource":"j\\b")"), odd);
  BOOST_TEST(contains(odd, R"("token":"t\"\n)"
                           "\xEF\xBF\xBD\""),
             odd);
}

BOOST_AUTO_TEST_CASE(verdict_objects) {
  // Below quorum, but the nodes that could not be asked could complete one.
  const std::vector<cli::node_report> split = {
      node("a:1", true, token_a), node("a:2", true, token_a), node("a:3", true, token_b),
      down("a:4"), misconfigured("a:5")};
  BOOST_TEST(cli::json_of(cli::judge_status("job", split)) ==
             R"({"type":"verdict","resource":"job","state":"unknown","token":null,"nodes":5,)"
             R"("quorum":3,"answered":3,"unreachable":1,"misconfigured":1,"held":3,)"
             R"("owner_nodes":2,"quorum_answered":true,"hint":null})");
  const std::vector<cli::node_report> quorum = {node("a:1", true, token_a),
                                                node("a:2", true, token_a), node("a:3", false)};
  BOOST_TEST(cli::json_of(cli::judge_status("job", quorum)) ==
             R"({"type":"verdict","resource":"job","state":"locked","token":")" + token_a +
                 R"(","nodes":3,"quorum":2,"answered":3,"unreachable":0,"misconfigured":0,)"
                 R"("held":2,"owner_nodes":2,"quorum_answered":true,"hint":null})");
  const std::vector<cli::node_report> below = {node("a:1", true, token_a), node("a:2", false),
                                               node("a:3", false)};
  const auto not_locked = cli::json_of(cli::judge_status("job", below));
  BOOST_TEST(contains(not_locked, R"("state":"not_locked","token":null)"), not_locked);
  const std::vector<cli::node_report> free = {node("a:1", false), node("a:2", false), down("a:3")};
  const auto nobody = cli::json_of(cli::judge_status("job", free));
  BOOST_TEST(contains(nobody, R"("state":"free")"), nobody);
}

BOOST_AUTO_TEST_CASE(semaphore_objects) {
  const std::vector<cli::node_report> locked = {node("a:1", true, token_a),
                                                node("a:2", true, token_a), down("a:3")};
  const std::vector<cli::node_report> maybe = {node("a:1", true, token_b), node("a:2", false),
                                               down("a:3")};
  const std::vector<cli::node_report> free = {node("a:1", false), node("a:2", false), down("a:3")};
  const std::vector<cli::status_verdict> slots = {cli::judge_status("{s}:slot:0", locked),
                                                  cli::judge_status("{s}:slot:1", maybe),
                                                  cli::judge_status("{s}:slot:2", free)};
  BOOST_TEST(cli::json_of(cli::judge_semaphore("s", slots)) ==
             R"({"type":"semaphore","resource":"s","permits":3,"held":1,"unknown":1,)"
             R"("slots":["locked","unknown","free"],"nodes":3,"quorum":2,"unreachable":1,)"
             R"("misconfigured":0,"quorum_answered":true})");
}

BOOST_AUTO_TEST_CASE(failure_reasons_have_names) {
  using cli::acquire_failure;
  BOOST_TEST(cli::failure_name(acquire_failure::contended) == "contended");
  BOOST_TEST(cli::failure_name(acquire_failure::no_quorum) == "no_quorum");
  BOOST_TEST(cli::failure_name(acquire_failure::validity_expired) == "validity_expired");
  BOOST_TEST(cli::failure_name(acquire_failure::wait_timeout) == "wait_timeout");
  BOOST_TEST(cli::failure_name(acquire_failure::misconfigured) == "misconfigured");
  BOOST_TEST(cli::failure_name(acquire_failure::invalid) == "invalid");
  BOOST_TEST(cli::failure_name(acquire_failure::other) == "other");
}

BOOST_AUTO_TEST_SUITE_END()

// What acquire, extend and release say, in words and in JSON.
BOOST_AUTO_TEST_SUITE(commands_of_several_steps)

namespace {

// An inspection of the lock "job" on one node per entry of `holders` (its token, or none).
redlock::inspection inspected(redlock::inspection::verdict state,
                              const std::vector<std::optional<std::string>>& holders,
                              std::optional<std::string> holder = std::nullopt) {
  redlock::inspection seen;
  seen.resource = "job";
  seen.quorum = holders.size() / 2 + 1;
  seen.state = state;
  seen.holder = std::move(holder);
  for (std::size_t i = 0; i < holders.size(); ++i) {
    redlock::node_holding node;
    node.address = "a:" + std::to_string(i + 1);
    node.holder = holders[i];
    seen.nodes.push_back(std::move(node));
  }
  return seen;
}

}  // namespace

// `acquire` refused says what `run` refused says, with the same exit code, in both forms.
BOOST_AUTO_TEST_CASE(not_acquired_reports_are_runs_line_and_object) {
  const auto ec = make_error_code(error::contended);
  const std::string diagnostics = "redlock: \"job\" not acquired: 0 of 3 nodes granted";
  const auto report = cli::report_not_acquired("job", 300ms, ec, diagnostics, 4);
  BOOST_TEST(report.exit_code == 4);
  BOOST_TEST(report.text == cli::not_acquired_message("job", 300ms, ec, diagnostics));
  BOOST_TEST(report.json.str() ==
             R"({"event":"not_acquired","resource":"job","reason":"contended","exit_code":4,)"
             R"("message":)" +
                 cli::json_string(cli::one_line(report.text)) + "}");
  // Too few nodes is never the conflict code.
  BOOST_TEST(
      cli::report_not_acquired("job", 0ms, make_error_code(error::no_quorum), "", 4).exit_code ==
      cli::exit_code::not_acquired);
}

BOOST_AUTO_TEST_CASE(acquired_notes_say_how_long_and_how_to_extend_or_release) {
  cli::acquired_lock lock{.resource = "job",
                          .token = token_a,
                          .fencing_token = std::nullopt,
                          .ttl = 60s,
                          .validity_ms = 59390,
                          .granted_nodes = 5,
                          .nodes = 5,
                          .quorum = 3};
  const std::vector<std::string> expected = {
      "redlock: acquired job (valid 59390 ms, granted by 5 of 5 nodes, quorum 3); nobody renews "
      "it: it expires within 60s unless extended",
      "redlock: extend it: redlock extend job --token " + token_a + " --ttl 60s",
      "redlock: release it: redlock release job --token " + token_a,
  };
  BOOST_TEST(cli::acquired_notes(lock) == expected, boost::test_tools::per_element());
  BOOST_TEST(cli::json_of(lock) ==
             R"({"event":"acquired","resource":"job","token":")" + token_a +
                 R"(","fencing_token":null,"validity_ms":59390,"ttl_ms":60000,)"
                 R"("granted_nodes":5,"nodes":5,"quorum":3})");

  // A name the shell would split is quoted in the commands, so that they can be pasted.
  lock.resource = "nightly report";
  lock.ttl = 1500ms;
  lock.fencing_token = 7;
  lock.granted_nodes = 3;
  lock.all_nodes_answered = false;
  const auto notes = cli::acquired_notes(lock);
  BOOST_TEST_REQUIRE(notes.size() == 3u);
  BOOST_TEST(contains(notes[0], "granted by 3 of 5 nodes so far, quorum 3, fencing token 7); "),
             notes[0]);
  BOOST_TEST(contains(notes[0], "expires within 1500ms"), notes[0]);
  BOOST_TEST(contains(notes[1], "redlock extend 'nightly report' --token "), notes[1]);
  BOOST_TEST(notes[1].ends_with(" --ttl 1500ms"), notes[1]);
  BOOST_TEST(contains(notes[2], "redlock release 'nightly report' --token "), notes[2]);
  BOOST_TEST(contains(cli::json_of(lock), R"("fencing_token":7,)"));
}

BOOST_AUTO_TEST_CASE(shell_words_and_durations) {
  BOOST_TEST(cli::shell_word("job:42/a.b-c_d") == "job:42/a.b-c_d");
  BOOST_TEST(cli::shell_word("a b") == "'a b'");
  BOOST_TEST(cli::shell_word("$HOME") == "'$HOME'");
  BOOST_TEST(cli::shell_word("it's") == R"('it'\''s')");
  BOOST_TEST(cli::shell_word("") == "''");
  BOOST_TEST(cli::duration_text(60s) == "60s");
  BOOST_TEST(cli::duration_text(1500ms) == "1500ms");
  BOOST_TEST(cli::duration_text(2min) == "120s");
}

// extend and release by token: each outcome's exit code, event and words.
BOOST_AUTO_TEST_CASE(by_token_outcomes) {
  using cli::by_token;
  struct outcome_case {
    by_token action;
    boost::system::error_code ec;
    int exit_code;
    std::string_view event;
    std::string_view says;
  };
  const auto aborted = make_error_code(boost::system::errc::operation_canceled);
  const std::vector<outcome_case> cases = {
      {by_token::extend, {}, 0, "extended", "redlock: extended job: it expires within 60s"},
      {by_token::release, {}, 0, "released", "redlock: released job (token aaaaaaaa)"},
      {by_token::extend, make_error_code(error::not_held), 3, "not_held",
       "redlock: job is not held by token aaaaaaaa: it is gone; nothing was extended"},
      {by_token::release, make_error_code(error::not_held), 3, "not_held",
       "redlock: job is not held by token aaaaaaaa: it is gone; nothing was released"},
      {by_token::extend, make_error_code(error::no_quorum), 75, "failed",
       "redlock: extending job failed: no quorum: too few nodes answered (the nodes that answered "
       "were extended); a:1 failed"},
      {by_token::release, make_error_code(error::no_quorum), 75, "failed",
       "redlock: releasing job failed: no quorum: too few nodes answered (the nodes that did not "
       "answer keep the key until its TTL runs out); a:1 failed"},
      {by_token::extend, make_error_code(error::invalid_argument), 2, "failed",
       "redlock: cannot extend job: a:1 failed"},
      {by_token::release, aborted, 1, "failed", "redlock: releasing job failed: "},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("expecting " << c.says) {
      const auto report = cli::report_by_token(c.action, "job", token_a, 60s, c.ec,
                                               c.ec ? "redlock: a:1 failed" : "", "it is gone");
      BOOST_TEST(report.exit_code == c.exit_code);
      BOOST_TEST(report.event == c.event);
      BOOST_TEST(report.text.starts_with(c.says), report.text);
      BOOST_TEST(report.json.str() ==
                 fmt::format(R"({{"event":"{}","resource":"job","exit_code":{},"message":{}}})",
                             c.event, c.exit_code, cli::json_string(cli::one_line(report.text))));
    }
  }
}

// A quorum refused the token: a look at the nodes tells gone from someone else's.
BOOST_AUTO_TEST_CASE(why_a_token_is_not_held) {
  using verdict = redlock::inspection::verdict;
  const auto ok = boost::system::error_code{};
  BOOST_TEST(cli::why_not_held(ok, inspected(verdict::free, {{}, {}, {}}), token_a) ==
             "it is gone from every node that answered (expired or released)");
  BOOST_TEST(cli::why_not_held(ok, inspected(verdict::held, {token_b, token_b, {}}, token_b),
                               token_a) == "it is held by another owner now (token bbbbbbbb)");
  BOOST_TEST(cli::why_not_held(ok, inspected(verdict::not_held, {token_a, {}, token_b}), token_a) ==
             "this token is left on 1 of 3 nodes, below the quorum of 2");
  BOOST_TEST(cli::why_not_held(ok, inspected(verdict::not_held, {token_b, {}, {}}), token_a) ==
             "no node that answered holds this token, and no owner has a quorum");
  const std::string unsettled = "a quorum of nodes says it is gone or someone else's";
  BOOST_TEST(cli::why_not_held(make_error_code(error::no_quorum),
                               inspected(verdict::unknown, {{}, {}, {}}), token_a) == unsettled);
  BOOST_TEST(cli::why_not_held(ok, inspected(verdict::unknown, {{}, {}, {}}), token_a) ==
             unsettled);
}

BOOST_AUTO_TEST_SUITE_END()
