// The redlock tool as a user runs it: a real process against five redis-server processes of the
// test's own. Every case ends by checking that no key of its resource is left on any node.

#include "cli/tool_fixture.hpp"
#include "cli/tool_process.hpp"
#include "redlock/exit_codes.hpp"
#include "redlock/version.hpp"
#include "support/async_test.hpp"
#include "support/inspector.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_fleet.hpp"
#include "support/redis_sentinel.hpp"
#include "support/sync_client.hpp"
#include "support/test_pki.hpp"

#include <boost/test/unit_test.hpp>
#include <boost/version.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pwd.h>
#include <signal.h>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

namespace cli = redlock::cli;
using namespace std::chrono_literals;
using namespace redlock::test::cli_checks;
using redlock::test::eventually_blocking;
using redlock::test::inspector;
using redlock::test::ms_since;
using redlock::test::redis_fleet;
using redlock::test::redis_server_options;
using redlock::test::run_tool;
using redlock::test::scratch_dir;
using redlock::test::sync_client;
using redlock::test::tool_process;
using redlock::test::tool_result;

// How often `command` (lower case) has run on the server at `port` since it started.
long long command_calls(std::uint16_t port, std::string_view command) {
  const auto info = sync_client(port).command({"INFO", "commandstats"}).text;
  const auto key = fmt::format("cmdstat_{}:calls=", command);
  const auto at = info.find(key);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + key.size()));
}

std::vector<long long> numbers_in(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<long long> numbers;
  long long n = 0;
  while (in >> n)
    numbers.push_back(n);
  return numbers;
}

// The user a forced release names: the effective user's name is in it, after the login name
// when that differs ("alice as root").
std::string effective_user() {
  const passwd* const entry = ::getpwuid(::geteuid());
  return entry != nullptr ? entry->pw_name : fmt::format("uid {}", ::geteuid());
}

std::string this_host() {
  std::array<char, 256> name{};
  ::gethostname(name.data(), name.size() - 1);
  return name.data();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(tool, tool_fixture)

BOOST_AUTO_TEST_CASE(racing_runs_take_turns) {
  auto stamps = [](const std::filesystem::path& file) {
    return fmt::format("date +%s%N >> {0}; sleep 0.5; date +%s%N >> {0}", file.string());
  };
  const auto file_a = scratch / "a";
  const auto file_b = scratch / "b";
  tool_process a({"run", resource, "--", "sh", "-c", stamps(file_a)}, nodes, scratch.path());
  tool_process b({"run", resource, "--", "sh", "-c", stamps(file_b)}, nodes, scratch.path());
  const auto result_a = a.wait(20s);
  const auto result_b = b.wait(20s);

  BOOST_TEST(result_a.exit_code == 0, result_a.err);
  BOOST_TEST(result_b.exit_code == 0, result_b.err);
  const auto times_a = numbers_in(file_a);
  const auto times_b = numbers_in(file_b);
  BOOST_TEST_REQUIRE(times_a.size() == 2u);
  BOOST_TEST_REQUIRE(times_b.size() == 2u);
  // Each held the lock for its whole half second, and never at the same time as the other.
  BOOST_TEST(times_a[1] - times_a[0] >= 400'000'000LL);
  BOOST_TEST(times_b[1] - times_b[0] >= 400'000'000LL);
  BOOST_TEST((times_a[1] <= times_b[0] || times_b[1] <= times_a[0]),
             "intervals overlap: a " << times_a[0] << ".." << times_a[1] << ", b " << times_b[0]
                                     << ".." << times_b[1]);
  for (const auto* result : {&result_a, &result_b}) {
    BOOST_TEST(contains(result->err, "redlock: acquired " + resource + " (valid "), result->err);
    BOOST_TEST(contains(result->err, " of 5 nodes, quorum 3)"), result->err);
    BOOST_TEST(contains(result->err, "redlock: released " + resource + " after "), result->err);
  }
  check_nothing_left();
}

// The pid COMMAND wrote to `file` (echo $$ > file), once it has; 0 if not within 10 s.
pid_t pid_written_to(const std::filesystem::path& file) {
  pid_t pid = 0;
  eventually_blocking(
      [&] {
        const auto pids = numbers_in(file);
        if (!pids.empty()) pid = static_cast<pid_t>(pids.front());
        return pid > 0;
      },
      10s);
  return pid;
}

BOOST_AUTO_TEST_CASE(lost_lock_stops_the_command) {
  const auto pid_file = scratch / "child.pid";
  tool_process run({"run", "--quiet", "--ttl", "1s", "--grace", "3s", resource, "--", "sh", "-c",
                    fmt::format("echo $$ > {}; exec sleep 30", pid_file.string())},
                   nodes, scratch.path());
  const pid_t child = pid_written_to(pid_file);
  BOOST_TEST_REQUIRE(child > 0);
  // The command starts once a quorum granted; the last grants may still be on their way.
  BOOST_TEST(eventually_blocking([&] { return look.present(resource) == 5u; }, 5s));

  // A majority stops answering: renewal cannot reach a quorum and the lock runs out.
  for (std::size_t i = 0; i < 3; ++i)
    fleet()[i].pause();
  const auto paused_at = std::chrono::steady_clock::now();
  const auto result = run.wait(20s);
  const auto took = ms_since(paused_at);
  for (std::size_t i = 0; i < 3; ++i)
    fleet()[i].resume();

  BOOST_TEST(result.exit_code == cli::exit_code::lock_lost, result.err);
  BOOST_TEST(took < 10000);
  BOOST_TEST(count_lines(result.err) == 1u, result.err);
  BOOST_TEST(contains(result.err, "redlock: lost the lock on " + resource), result.err);
  BOOST_TEST(contains(result.err, "validity ran out"), result.err);
  // The command got SIGTERM (sleep does not catch it) and was reaped by the tool.
  BOOST_TEST(contains(result.err, "was killed by SIGTERM"), result.err);
  errno = 0;
  BOOST_TEST(::kill(child, 0) == -1);
  BOOST_TEST(errno == ESRCH);
  // The stopped nodes' copies could not be deleted while they were stopped; they expire within the
  // TTL of their last extension, and the release queued to them also runs once they resume.
  BOOST_TEST(eventually_blocking([&] { return nothing_left(); }, 2000ms));
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(exit_code_of_the_command_passes_through) {
  const auto result = run({"run", "--quiet", resource, "--", "sh", "-c", "exit 3"});
  BOOST_TEST(result.exit_code == 3, result.err);
  BOOST_TEST(result.err.empty(), result.err);  // --quiet: no status lines
  check_nothing_left();
}

// COMMAND gets the lock's random value, and with --fencing its fencing token, which grows from
// one run to the next. Without --fencing a token inherited from an enclosing run is removed.
BOOST_AUTO_TEST_CASE(command_gets_the_token_and_with_fencing_the_fencing_token) {
  ::setenv("REDLOCK_FENCING_TOKEN", "17", 1);
  const auto plain = run({"run", "--quiet", resource, "--", "sh", "-c",
                          "echo \"token=$REDLOCK_TOKEN fence=${REDLOCK_FENCING_TOKEN-none}\" >&2"});
  ::unsetenv("REDLOCK_FENCING_TOKEN");
  BOOST_TEST(plain.exit_code == 0, plain.err);
  BOOST_TEST(contains(plain.err, "fence=none"), plain.err);
  BOOST_TEST(plain.err.find("token=") != std::string::npos);
  BOOST_TEST(plain.err.size() >= std::string("token=").size() + 40, plain.err);
  std::vector<unsigned long long> fences;
  for (int i = 0; i < 2; ++i) {
    const auto fenced = run({"run", "--fencing", resource, "--", "sh", "-c",
                             "echo \"fence=$REDLOCK_FENCING_TOKEN\" >&2"});
    BOOST_TEST_REQUIRE(fenced.exit_code == 0, fenced.err);
    BOOST_TEST(contains(fenced.err, "fencing token"), fenced.err);  // the acquired line says it
    const auto at = fenced.err.find("fence=");
    BOOST_TEST_REQUIRE(at != std::string::npos, fenced.err);
    fences.push_back(std::stoull(fenced.err.substr(at + 6)));
  }
  BOOST_TEST(fences[1] > fences[0]);
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(command_killed_by_a_signal_gives_128_plus_n) {
  const auto result = run({"run", resource, "--", "sh", "-c", "kill -USR1 $$"});
  BOOST_TEST(result.exit_code == 128 + SIGUSR1, result.err);
  BOOST_TEST(contains(result.err, "released"), result.err);
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(contended_lock_is_not_acquired) {
  set_everywhere("someone-else");
  const auto marker = scratch / "ran";
  const auto result =
      run({"run", "--wait", "300ms", resource, "--", "touch", marker.string()}, 10s);
  BOOST_TEST(result.exit_code == cli::exit_code::not_acquired, result.err);
  BOOST_TEST(count_lines(result.err) == 1u, result.err);
  BOOST_TEST(contains(result.err, "contended"), result.err);
  BOOST_TEST(contains(result.err, resource), result.err);
  BOOST_TEST(result.took.count() < 5000);
  BOOST_TEST(!std::filesystem::exists(marker));
  // Another owner's key is never touched.
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(unreachable_nodes_give_no_quorum) {
  refusing_ports closed(5);
  const auto result = run_tool(
      {"run", "--nodes", node_urls(closed.ports()), "--wait", "300ms", resource, "--", "true"}, {},
      scratch.path(), 10s);
  BOOST_TEST(result.exit_code == cli::exit_code::not_acquired, result.err);
  BOOST_TEST(count_lines(result.err) == 1u, result.err);
  BOOST_TEST(contains(result.err, "no quorum"), result.err);
  BOOST_TEST(contains(result.err, "Connection refused"), result.err);  // says how nodes failed
  check_nothing_left();
}

// A node that refuses every connection was never sent a request, so nothing of ours is there: the
// tool's exit does not wait for it (the shutdown's bound, 2 x node_timeout + connect_timeout, is
// 1.2 s with the defaults), neither after COMMAND ran nor after giving up on a lock held elsewhere.
BOOST_AUTO_TEST_CASE(a_node_refusing_connections_does_not_delay_the_exit) {
  refusing_ports closed(1);
  const auto three = node_urls({fleet()[0].port(), fleet()[1].port(), closed.ports()[0]});
  const auto ran = run_tool({"run", resource, "--", "true"}, three, scratch.path(), 10s);
  BOOST_TEST(ran.exit_code == 0, ran.err);
  BOOST_TEST(contains(ran.err, " ms, granted by 2 of 3 nodes, quorum 2)"), ran.err);
  BOOST_TEST(ran.took.count() < 1000, "took " << ran.took.count() << " ms");
  check_nothing_left();

  look.set(0, resource, "someone-else", 20s);
  look.set(1, resource, "someone-else", 20s);
  const auto waited =
      run_tool({"run", "--wait", "3s", resource, "--", "true"}, three, scratch.path(), 10s);
  BOOST_TEST(waited.exit_code == cli::exit_code::not_acquired, waited.err);
  BOOST_TEST(contains(waited.err, "contended"), waited.err);
  BOOST_TEST(waited.took.count() >= 3000, "took " << waited.took.count() << " ms");
  BOOST_TEST(waited.took.count() < 3600, "took " << waited.took.count() << " ms");
  BOOST_TEST(look.holding(resource, "someone-else") == 2u);
  delete_everywhere();
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_naming_the_problem) {
  const auto marker = (scratch / "ran").string();
  struct usage_case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<usage_case> cases = {
      {{"run", "--bogus", resource, "--", "touch", marker}, "\"--bogus\""},
      {{"run", "--ttl", "0", resource, "--", "touch", marker}, "--ttl: \"0\""},
      {{"run", "--wait", "soon", resource, "--", "touch", marker}, "--wait: \"soon\""},
      {{"run", "--grace", "-5s", resource, "--", "touch", marker}, "--grace: \"-5s\""},
      {{"run", "--conflict-exit-code", "300", resource, "--", "touch", marker},
       "--conflict-exit-code: \"300\" is not an exit code"},
      {{"run", "--conflict-exit-code", "-1", resource, "--", "touch", marker},
       "--conflict-exit-code: \"-1\" is not an exit code"},
      {{"run", "--conflict-exit-code=x", resource, "--", "touch", marker},
       "--conflict-exit-code: \"x\" is not an exit code"},
      {{"run", "--nodes", "redis://127.0.0.1:99999", resource, "--", "touch", marker}, "port"},
      {{"run", "--nodes", "http://127.0.0.1", resource, "--", "touch", marker}, "scheme"},
      // A seed's port without its host, not a host called "7972".
      {{"status", "--nodes", "redis+cluster://127.0.0.1:7000?seed=7972", resource},
       "--nodes: bad node URL \"redis+cluster://127.0.0.1:7000?seed=7972\": seed \"7972\": host "
       "\"7972\" is a number: a port without its host?"},
      {{"run", "--nodes", "redis+sentinel://127.0.0.1?master=m&seed=26380", resource, "--", "touch",
        marker},
       "seed \"26380\": host \"26380\" is a number"},
      {{"run", "--permits", "0", resource, "--", "touch", marker},
       "--permits: \"0\" is not a number of permits (expected a whole number from 1 to 1024)"},
      {{"run", "--permits", "1025", resource, "--", "touch", marker},
       "--permits: \"1025\" is not a number"},
      {{"status", "--permits", "two", resource}, "--permits: \"two\" is not a number"},
      {{"run", "--", "touch", marker}, "missing RESOURCE"},
      {{"run", resource}, "COMMAND"},
      {{"run", resource, "--"}, "missing COMMAND"},
      {{"status"}, "missing RESOURCE"},
      {{"acquire", resource, "--", "touch", marker}, "acquire runs no COMMAND"},
      {{"extend", resource, "--ttl", "1s"}, "missing --token TOKEN"},
      {{"extend", resource, "--token", "t"}, "missing --ttl DURATION"},
      {{"release", resource}, "missing --token TOKEN"},
      {{"release", resource, "--token", "t", "--force"}, "--token and --force exclude each other"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{}, "no command given"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("expecting " << c.expected) {
      const auto result = run(c.args);
      BOOST_TEST(result.exit_code == cli::exit_code::usage, result.err);
      BOOST_TEST(count_lines(result.err) == 1u, result.err);
      BOOST_TEST(contains(result.err, c.expected), result.err);
    }
  }
  const auto bad_env =
      run_tool({"run", resource, "--", "touch", marker}, "redis://127.0.0.1:0", scratch.path());
  BOOST_TEST(bad_env.exit_code == cli::exit_code::usage, bad_env.err);
  BOOST_TEST(contains(bad_env.err, "REDLOCK_NODES: bad node URL"), bad_env.err);
  BOOST_TEST(!std::filesystem::exists(marker));
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(command_not_found_or_not_executable) {
  const auto missing = run({"run", resource, "--", "no-such-command-for-redlock-tests"});
  BOOST_TEST(missing.exit_code == cli::exit_code::not_found, missing.err);
  BOOST_TEST(contains(missing.err, "not found"), missing.err);
  check_nothing_left();

  const auto not_executable = scratch / "script.sh";
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(
      not_executable, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const auto refused = run({"run", resource, "--", not_executable.string()});
  BOOST_TEST(refused.exit_code == cli::exit_code::cannot_execute, refused.err);
  BOOST_TEST(contains(refused.err, "cannot run"), refused.err);
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(help_documents_every_exit_code) {
  const auto help = run({"--help"});
  BOOST_TEST(help.exit_code == 0);
  BOOST_TEST(help.err.empty());
  for (const std::string_view part :
       {"redlock run", "redlock status", "--nodes",   "--ttl",         "--wait",
        "--grace",     "--quiet",        "--timeout", "REDLOCK_NODES", "default 30s",
        "default 10s", "default 5s",     "  0..255",  "128+N",         "  1 ",
        "  2 ",        "  75 ",          "  76 ",     "  126 ",        "  127 ",
        "130/143"}) {
    BOOST_TEST(contains(help.out, part), "--help lacks \"" << part << "\"");
  }
  BOOST_TEST(contains(help.out, "--conflict-exit-code N"));
  BOOST_TEST(contains(help.out, "--permits N"));
  for (const std::string_view part :
       {"redlock acquire", "redlock extend", "redlock release", "--token TOKEN", "--force", "--yes",
        "  3 ", "run is the safe default"}) {
    BOOST_TEST(contains(help.out, part), "--help lacks \"" << part << "\"");
  }
  BOOST_TEST(contains(help.out, "REDLOCK_PERMIT"));
  // --json for both commands, with the fields of every kind of object.
  for (const std::string_view part :
       {"--json", "not_acquired", "cannot_run", "\"type\":\"node\"", "\"type\":\"verdict\"",
        "\"type\":\"semaphore\"", "quorum_answered", "\"type\":\"set\"", "\"type\":\"rw_node\"",
        "\"type\":\"rw_verdict\"", "not_a_lock", "--read, --write"}) {
    BOOST_TEST(contains(help.out, part), "--help lacks \"" << part << "\"");
  }
  for (const auto& args : std::vector<std::vector<std::string>>{{"help"},
                                                                {"help", "run"},
                                                                {"run", "--help"},
                                                                {"status", "--help"},
                                                                {"-h"},
                                                                {"help", "acquire"},
                                                                {"extend", "--help"},
                                                                {"release", "-h"}}) {
    const auto result = run(args);
    BOOST_TEST(result.exit_code == 0);
    BOOST_TEST(contains(result.out, "Exit codes:"));
    // Every kind of node a URL can name, in the help of every command that takes --nodes.
    for (const std::string_view scheme :
         {"redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://",
          "redis+sentinel://", "rediss+sentinel://", "?master=NAME", "wait_replicas=N"}) {
      BOOST_TEST(contains(result.out, scheme), "help lacks \"" << scheme << "\"");
    }
  }
}

BOOST_AUTO_TEST_CASE(status_of_a_free_resource) {
  const auto result = run({"status", resource});
  BOOST_TEST(result.exit_code == 0, result.err);
  const auto lines = lines_of(result.out);
  BOOST_TEST_REQUIRE(lines.size() == 6u, result.out);
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST(lines[i].starts_with(fmt::format("127.0.0.1:{}", fleet()[i].port())), lines[i]);
    BOOST_TEST(contains(lines[i], "reachable    free"), lines[i]);
  }
  BOOST_TEST(lines[5] == resource + ": held on 0 of 5 nodes (quorum 3): free");
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(status_while_held_and_with_nodes_down) {
  const auto ready = scratch / "ready";
  tool_process holder(
      {"run", resource, "--", "sh", "-c", fmt::format("touch {}; exec sleep 30", ready.string())},
      nodes, scratch.path());
  BOOST_TEST_REQUIRE(eventually_blocking([&] { return std::filesystem::exists(ready); }, 10000ms));
  const auto token = look.get(0, resource);
  BOOST_TEST_REQUIRE(token.has_value());
  const std::string prefix = "token " + token->substr(0, 8);

  const auto held = run({"status", resource});
  BOOST_TEST(held.exit_code == 0, held.err);
  auto lines = lines_of(held.out);
  BOOST_TEST_REQUIRE(lines.size() == 6u, held.out);
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST(contains(lines[i], "reachable    held  ttl "), lines[i]);
    BOOST_TEST(contains(lines[i], prefix), lines[i]);
  }
  BOOST_TEST(contains(lines[5], ": held on 5 of 5 nodes (quorum 3): locked"), lines[5]);
  for (std::size_t i = 0; i < 5; ++i)
    BOOST_TEST(contains(lines[i], "subscribers 0"), lines[i]);

  // A second run waits for the lock: subscribed to release announcements on every node, which
  // status counts; then it gives up, and the subscriptions go with it.
  {
    tool_process waiter({"run", "--wait", "30s", resource, "--", "true"}, nodes, scratch.path());
    const auto waiting_everywhere = [&] {
      const auto seen = run({"status", resource});
      const auto seen_lines = lines_of(seen.out);
      if (seen_lines.size() != 6u) return false;
      for (std::size_t i = 0; i < 5; ++i) {
        if (!contains(seen_lines[i], "subscribers 1")) return false;
      }
      return true;
    };
    BOOST_TEST(eventually_blocking(waiting_everywhere, 10000ms), "status shows the waiter");
    waiter.signal(SIGTERM);
    waiter.wait(10s);
  }

  fleet()[3].kill9();
  fleet()[4].kill9();
  const auto degraded = run({"status", resource});
  BOOST_TEST(degraded.exit_code == 0, degraded.err);
  lines = lines_of(degraded.out);
  BOOST_TEST_REQUIRE(lines.size() == 7u, degraded.out);
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_TEST(contains(lines[i], prefix), lines[i]);
  for (std::size_t i = 3; i < 5; ++i) {
    BOOST_TEST(contains(lines[i], "unreachable  connect failed"), lines[i]);
  }
  BOOST_TEST(contains(lines[5], ": held on 3 of 5 nodes (quorum 3): locked"), lines[5]);
  BOOST_TEST(lines[6] == "unreachable nodes: 2");

  // SIGTERM to the tool reaches the command; the lock is released once it has ended.
  holder.signal(SIGTERM);
  const auto ended = holder.wait(10s);
  BOOST_TEST(ended.exit_code == 128 + SIGTERM, ended.err);
  BOOST_TEST(contains(ended.err, "redlock: released " + resource), ended.err);
  fleet()[3].start();
  fleet()[4].start();
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(status_without_a_quorum_of_nodes_fails) {
  refusing_ports closed(2);
  const auto urls = node_urls({fleet()[0].port(), closed.ports()[0], closed.ports()[1]});
  const auto result = run_tool({"status", "--nodes", urls, resource}, {}, scratch.path());
  BOOST_TEST(result.exit_code == 1, result.out);
  BOOST_TEST(contains(result.out, "unknown: only 1 of 3 nodes reachable"), result.out);
  BOOST_TEST(contains(result.out, "unreachable nodes: 2"), result.out);
}

// status --json: the facts of the text lines as one object per node and one for the verdict, the
// owner's whole token in each; with --permits the slots' objects and a summary.
BOOST_AUTO_TEST_CASE(status_json_while_held) {
  const auto ready = scratch / "ready";
  tool_process holder(
      {"run", resource, "--", "sh", "-c", fmt::format("touch {}; exec sleep 30", ready.string())},
      nodes, scratch.path());
  BOOST_TEST_REQUIRE(eventually_blocking([&] { return std::filesystem::exists(ready); }, 10000ms));
  const auto token = look.get(0, resource);
  BOOST_TEST_REQUIRE(token.has_value());

  const auto status = run({"status", "--json", resource});
  BOOST_TEST(status.exit_code == 0, status.err);
  BOOST_TEST(status.err.empty(), status.err);
  const auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 6u, status.out);
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      const auto& line = lines[i];
      BOOST_TEST(is_json_object(line), line);
      BOOST_TEST(
          line.starts_with("{" + json_field("type", "node") + "," +
                           json_field("resource", resource) + fmt::format(",\"index\":{},", i) +
                           json_field("address", fmt::format("127.0.0.1:{}", fleet()[i].port()))),
          line);
      BOOST_TEST(contains(line, json_field("state", "held")), line);
      BOOST_TEST(contains(line, json_field("token", *token)), line);
      const auto pttl = json_number(line, "pttl_ms");
      BOOST_TEST((pttl > 0 && pttl <= 30000), line);
      BOOST_TEST(contains(line, "\"error\":null"), line);
      BOOST_TEST(contains(line, "\"subscribers\":0"), line);
    }
  }
  const auto& verdict = lines[5];
  BOOST_TEST(is_json_object(verdict), verdict);
  BOOST_TEST(verdict.starts_with("{" + json_field("type", "verdict") + "," +
                                 json_field("resource", resource) + "," +
                                 json_field("state", "locked") + "," + json_field("token", *token)),
             verdict);
  BOOST_TEST(contains(verdict, "\"nodes\":5,\"quorum\":3,\"answered\":5,\"unreachable\":0"),
             verdict);
  BOOST_TEST(
      verdict.ends_with("\"held\":5,\"owner_nodes\":5,\"quorum_answered\":true,\"hint\":null}"),
      verdict);

  // The same name as a semaphore: its slot keys are free.
  const auto slots = run({"status", "--json", "--permits", "2", resource});
  BOOST_TEST(slots.exit_code == 0, slots.err);
  const auto slot_lines = lines_of(slots.out);
  BOOST_TEST_REQUIRE(slot_lines.size() == 13u, slots.out);  // per slot 5 nodes and a verdict
  for (const auto& line : slot_lines)
    BOOST_TEST(is_json_object(line), line);
  BOOST_TEST(contains(slot_lines[0], json_field("resource", slot_key(resource, 0))), slot_lines[0]);
  BOOST_TEST(contains(slot_lines[5], json_field("type", "verdict")), slot_lines[5]);
  BOOST_TEST(contains(slot_lines[5], json_field("state", "free")), slot_lines[5]);
  BOOST_TEST(contains(slot_lines[6], json_field("resource", slot_key(resource, 1))), slot_lines[6]);
  BOOST_TEST(slot_lines[12].starts_with("{" + json_field("type", "semaphore") + "," +
                                        json_field("resource", resource) +
                                        ",\"permits\":2,\"held\":0,\"unknown\":0,"
                                        "\"slots\":[\"free\",\"free\"]"),
             slot_lines[12]);

  holder.signal(SIGTERM);
  const auto ended = holder.wait(10s);
  BOOST_TEST(ended.exit_code == 128 + SIGTERM, ended.err);
  check_nothing_left();
}

// run --json: its own lines on stderr become objects; COMMAND's output is not touched.
BOOST_AUTO_TEST_CASE(run_json_reports_acquired_and_released) {
  const auto result = run({"run", "--json", "--fencing", resource, "--", "sh", "-c",
                           "echo \"$REDLOCK_TOKEN\"; echo from-command >&2"});
  BOOST_TEST_REQUIRE(result.exit_code == 0, result.err);
  const auto out = lines_of(result.out);
  BOOST_TEST_REQUIRE(out.size() == 1u, result.out);
  const auto& token = out[0];
  BOOST_TEST(token.size() == 40u, token);
  const auto lines = lines_of(result.err);
  BOOST_TEST_REQUIRE(lines.size() == 3u, result.err);

  const auto& acquired = lines[0];
  BOOST_TEST(is_json_object(acquired), acquired);
  BOOST_TEST(acquired.starts_with("{" + json_field("event", "acquired") + "," +
                                  json_field("resource", resource) + ",\"permit\":null," +
                                  json_field("key", resource) + "," + json_field("token", token) +
                                  ",\"fencing_token\":"),
             acquired);
  BOOST_TEST(json_number(acquired, "fencing_token") >= 0, acquired);
  const auto validity = json_number(acquired, "validity_ms");
  BOOST_TEST((validity > 0 && validity <= 30000), acquired);
  BOOST_TEST(contains(acquired, "\"granted_nodes\":5,\"nodes\":5,\"quorum\":3,"), acquired);

  BOOST_TEST(lines[1] == "from-command");

  const auto& released = lines[2];
  BOOST_TEST(is_json_object(released), released);
  BOOST_TEST(
      released.starts_with("{" + json_field("event", "released") + "," +
                           json_field("resource", resource) + ",\"permit\":null,\"held_ms\":"),
      released);
  BOOST_TEST(released.ends_with(",\"exit_code\":0}"), released);
  check_nothing_left();

  // --quiet leaves out the same events as it leaves out lines.
  const auto quiet = run({"run", "--json", "--quiet", resource, "--", "true"});
  BOOST_TEST(quiet.exit_code == 0, quiet.err);
  BOOST_TEST(quiet.err.empty(), quiet.err);
  check_nothing_left();
}

// The lines that end a run without COMMAND are objects too, with the exit code they give.
BOOST_AUTO_TEST_CASE(run_json_reports_why_nothing_ran) {
  set_everywhere("someone-else");
  const auto marker = scratch / "ran";
  const auto held =
      run({"run", "--json", "--wait", "0", resource, "--", "touch", marker.string()}, 10s);
  BOOST_TEST(held.exit_code == cli::exit_code::not_acquired, held.err);
  const auto lines = lines_of(held.err);
  BOOST_TEST_REQUIRE(lines.size() == 1u, held.err);
  BOOST_TEST(is_json_object(lines[0]), lines[0]);
  BOOST_TEST(lines[0].starts_with("{" + json_field("event", "not_acquired") + "," +
                                  json_field("resource", resource) + "," +
                                  json_field("reason", "contended") +
                                  ",\"exit_code\":75,\"message\":\"\\\"" + resource +
                                  "\\\" not acquired: contended"),
             lines[0]);
  BOOST_TEST(!std::filesystem::exists(marker));
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();

  const auto missing = run({"run", "--json", resource, "--", "no-such-command-for-redlock-tests"});
  BOOST_TEST(missing.exit_code == cli::exit_code::not_found, missing.err);
  const auto missing_lines = lines_of(missing.err);
  // acquired, then cannot_run: the lock was had, the command could not be run.
  BOOST_TEST_REQUIRE(missing_lines.size() == 2u, missing.err);
  BOOST_TEST(contains(missing_lines[0], json_field("event", "acquired")), missing_lines[0]);
  BOOST_TEST(is_json_object(missing_lines[1]), missing_lines[1]);
  BOOST_TEST(missing_lines[1].starts_with("{" + json_field("event", "cannot_run") + "," +
                                          json_field("resource", resource) +
                                          ",\"exit_code\":127,\"message\":"),
             missing_lines[1]);
  BOOST_TEST(contains(missing_lines[1], "(command not found)"), missing_lines[1]);
  check_nothing_left();
}

// The same URLs and --tls-* flags as the library: a command run under a lock taken over TLS and a
// Unix socket, and status saying how each node was reached and under which name it was verified.
BOOST_AUTO_TEST_CASE(tls_and_unix_socket_nodes) {
  const redlock::test::test_pki pki;
  redlock::test::redis_server_options tls;
  tls.tls = redlock::test::redis_server_options::tls_listener{
      pki.server().cert.string(), pki.server().key.string(), pki.ca().string(), false};
  redlock::test::redis_fleet tls_nodes(2, tls);
  redlock::test::redis_server_options local;
  local.unix_socket = true;
  redlock::test::redis_server socket_node(local);
  const std::string urls =
      fmt::format("rediss://127.0.0.1:{},rediss://localhost:{},unix://{}", tls_nodes[0].tls_port(),
                  tls_nodes[1].tls_port(), socket_node.unix_path().string());
  const std::string ca = pki.ca().string();

  const auto ran = run_tool({"run", "--nodes", urls, "--tls-ca", ca, resource, "--", "true"}, {},
                            scratch.path());
  BOOST_TEST(ran.exit_code == 0, ran.err);
  BOOST_TEST(contains(ran.err, "redlock: acquired " + resource), ran.err);

  const auto status =
      run_tool({"status", "--nodes", urls, "--tls-ca", ca, resource}, {}, scratch.path());
  BOOST_TEST(status.exit_code == 0, status.err);
  const auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 4u, status.out);
  BOOST_TEST(contains(lines[0], "free  subscribers 0  (tls, verified as 127.0.0.1)"), lines[0]);
  BOOST_TEST(contains(lines[1], "free  subscribers 0  (tls, verified as localhost)"), lines[1]);
  BOOST_TEST(contains(lines[2], "free  subscribers 0  (unix socket)"), lines[2]);

  // Without the CA the servers' certificates are refused, and status says why.
  const auto refused = run_tool({"status", "--nodes", urls, resource}, {}, scratch.path());
  BOOST_TEST(refused.exit_code == 1, refused.out);
  BOOST_TEST(contains(refused.out, "misconfigured the server's TLS certificate was rejected"),
             refused.out);
  const auto insecure =
      run_tool({"status", "--nodes", urls, "--tls-insecure", resource}, {}, scratch.path());
  BOOST_TEST(insecure.exit_code == 0, insecure.out);
  BOOST_TEST(contains(insecure.out, "(tls, NOT verified)"), insecure.out);
}

BOOST_AUTO_TEST_CASE(signal_while_waiting_cancels_the_acquire) {
  set_everywhere("someone-else");
  const auto marker = scratch / "ran";
  auto tool_connected = [&] {
    const auto clients = sync_client(fleet()[0].port()).command({"CLIENT", "LIST"}).text;
    return contains(clients, "name=redlock-cli ");
  };
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    // The previous tool's connection is gone first, so that it cannot be taken for this one's.
    BOOST_TEST_REQUIRE(eventually_blocking([&] { return !tool_connected(); }, 10s));
    tool_process waiting({"run", "--wait", "20s", resource, "--", "touch", marker.string()}, nodes,
                         scratch.path());
    // Its signal handlers are in place before it connects; a slow start (a sanitized build) must
    // not let the signal arrive earlier, when its default action would end the tool silently.
    const bool retrying = eventually_blocking(tool_connected, 10s);
    BOOST_TEST_REQUIRE(retrying);
    std::this_thread::sleep_for(100ms);  // into its retries
    BOOST_TEST_REQUIRE(waiting.running());
    waiting.signal(signal);
    const auto result = waiting.wait(5s);
    BOOST_TEST(result.exit_code == 128 + signal, result.err);
    BOOST_TEST(contains(result.err, "while waiting for " + resource), result.err);
  }
  BOOST_TEST(!std::filesystem::exists(marker));
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(wait_zero_tries_exactly_once) {
  const auto marker = scratch / "ran";
  const auto port = fleet()[0].port();
  // What one run with one round sends to a node (its handshake's probes included): the baseline.
  auto before = command_calls(port, "set");
  const auto free_run = run({"run", "--wait", "0", resource, "--", "touch", marker.string()});
  const auto one_round = command_calls(port, "set") - before;
  BOOST_TEST(free_run.exit_code == 0, free_run.err);
  BOOST_TEST(std::filesystem::exists(marker));
  check_nothing_left();
  std::filesystem::remove(marker);

  set_everywhere("someone-else");
  before = command_calls(port, "set");
  const auto held = run({"run", "--wait", "0", resource, "--", "touch", marker.string()}, 10s);
  // No second round. One round may send less than the baseline: a node still in its handshake
  // when the other nodes' refusals decide the round is never written to (a loaded host).
  const auto held_round = command_calls(port, "set") - before;
  BOOST_TEST(held_round <= one_round);
  BOOST_TEST(held.exit_code == cli::exit_code::not_acquired, held.err);
  BOOST_TEST(held.took.count() < 3000);
  BOOST_TEST(count_lines(held.err) == 1u, held.err);
  BOOST_TEST(contains(held.err, "redlock: \"" + resource + "\" not acquired: contended"), held.err);
  BOOST_TEST(!std::filesystem::exists(marker));

  // The baseline means something: a wait of its own retries, sending more.
  before = command_calls(port, "set");
  const auto waited = run({"run", "--wait", "300ms", resource, "--", "touch", marker.string()});
  BOOST_TEST(command_calls(port, "set") - before > one_round);
  BOOST_TEST(waited.exit_code == cli::exit_code::not_acquired, waited.err);
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();
  check_nothing_left();
}

// --wait 0 with the only node down gives up at once: a node that refuses connections refuses the
// round as it would after any wait, so there is no connect to wait for (it took connect_timeout,
// 1 s). The time alone could flake on a busy machine, but a wait for connect_timeout can never
// end sooner than that second: the case passes when one of three tries ends within half of it.
BOOST_AUTO_TEST_CASE(wait_zero_with_the_only_node_down_gives_up_at_once) {
  refusing_ports closed(1);
  const auto down = node_urls(closed.ports());
  const std::vector<std::string> acquire = {"acquire", "--wait", "0", resource};
  const std::vector<std::string> run_true = {"run", "--wait", "0", resource, "--", "true"};
  for (const auto& args : {acquire, run_true}) {
    BOOST_TEST_CONTEXT("redlock " << args.front()) {
      auto fastest = std::chrono::milliseconds::max();
      for (int attempt = 0; attempt < 3 && fastest >= 500ms; ++attempt) {
        const auto result = run_tool(args, down, scratch.path(), 10s);
        BOOST_TEST(result.exit_code == cli::exit_code::not_acquired, result.err);
        BOOST_TEST(contains(result.err, "Connection refused"), result.err);
        fastest = std::min(fastest, result.took);
      }
      BOOST_TEST(fastest.count() < 500, "took " << fastest.count() << " ms");
    }
  }
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(conflict_exit_code_replaces_75_for_a_lock_held_elsewhere) {
  set_everywhere("someone-else");
  const auto marker = scratch / "ran";
  for (const std::string wait : {"0", "300ms"}) {
    BOOST_TEST_CONTEXT("--wait " << wait) {
      const auto result = run({"run", "--wait", wait, "--conflict-exit-code", "3", resource, "--",
                               "touch", marker.string()},
                              10s);
      BOOST_TEST(result.exit_code == 3, result.err);
      BOOST_TEST(contains(result.err, "contended"), result.err);
    }
  }
  BOOST_TEST(!std::filesystem::exists(marker));
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();

  // Nodes that do not answer are no other owner's lock: still 75.
  refusing_ports closed(3);
  const auto down = run_tool({"run", "--nodes", node_urls(closed.ports()), "--wait", "0",
                              "--conflict-exit-code", "3", resource, "--", "true"},
                             {}, scratch.path(), 10s);
  BOOST_TEST(down.exit_code == cli::exit_code::not_acquired, down.err);
  BOOST_TEST(contains(down.err, "no quorum"), down.err);
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(grace_zero_kills_at_once_when_the_lock_is_lost) {
  const auto pid_file = scratch / "child.pid";
  // COMMAND ignores SIGTERM: only a SIGKILL ends it before its 30 s are up.
  tool_process run({"run", "--ttl", "1s", "--grace", "0", resource, "--", "sh", "-c",
                    fmt::format("trap '' TERM; echo $$ > {}; exec sleep 30", pid_file.string())},
                   nodes, scratch.path());
  const pid_t child = pid_written_to(pid_file);
  BOOST_TEST_REQUIRE(child > 0);
  // The command starts once a quorum granted; the last grants may still be on their way.
  BOOST_TEST(eventually_blocking([&] { return look.present(resource) == 5u; }, 5s));

  // The key vanishes from every node (an operator's DEL): the next renewal, at half the TTL,
  // finds it gone.
  delete_everywhere();
  const auto deleted_at = std::chrono::steady_clock::now();
  const auto result = run.wait(20s);
  const auto took = ms_since(deleted_at);

  BOOST_TEST(result.exit_code == cli::exit_code::lock_lost, result.err);
  BOOST_TEST(took < 3000);
  BOOST_TEST(contains(result.err, "redlock: lost the lock on " + resource), result.err);
  BOOST_TEST(
      contains(result.err, "COMMAND got SIGKILL at once (--grace 0) and was killed by SIGKILL"),
      result.err);
  BOOST_TEST(!contains(result.err, "SIGTERM"), result.err);
  // The loss is told once, not also as a warning.
  BOOST_TEST(!contains(result.err, "redlock: warning"), result.err);
  errno = 0;
  BOOST_TEST(::kill(child, 0) == -1);
  BOOST_TEST(errno == ESRCH);
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(acquired_line_counts_the_nodes_that_granted) {
  const auto healthy = run({"run", resource, "--", "true"});
  BOOST_TEST(healthy.exit_code == 0, healthy.err);
  BOOST_TEST(contains(healthy.err, "redlock: acquired " + resource + " (valid "), healthy.err);
  BOOST_TEST(contains(healthy.err, " ms, granted by 5 of 5 nodes, quorum 3)\n"), healthy.err);
  BOOST_TEST(!contains(healthy.err, "warning"), healthy.err);
  check_nothing_left();

  fleet()[3].kill9();
  fleet()[4].kill9();
  const auto degraded = run({"run", resource, "--", "true"});
  BOOST_TEST(degraded.exit_code == 0, degraded.err);
  const auto lines = lines_of(degraded.err);
  BOOST_TEST_REQUIRE(lines.size() == 3u, degraded.err);
  BOOST_TEST(contains(lines[0], " ms, granted by 3 of 5 nodes, quorum 3)"), lines[0]);
  // The library's account of the acquire names the nodes that did not grant it, and why.
  BOOST_TEST(lines[1].starts_with("redlock: warning: \"" + resource +
                                  "\" acquired on 3 of 5 nodes (quorum 3): "),
             lines[1]);
  BOOST_TEST(contains(lines[1], fmt::format("127.0.0.1:{} failed (", fleet()[3].port())), lines[1]);
  BOOST_TEST(contains(lines[2], "redlock: released " + resource), lines[2]);
  // --quiet: neither line.
  const auto quiet = run({"run", "--quiet", resource, "--", "true"});
  BOOST_TEST(quiet.exit_code == 0, quiet.err);
  BOOST_TEST(quiet.err.empty(), quiet.err);
  fleet()[3].start();
  fleet()[4].start();
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(acquired_line_does_not_wait_long_for_a_stalled_node) {
  // Stopped nodes accept the connection but never answer: their votes time out (node_timeout,
  // 100 ms), after the line's 50 ms bound.
  fleet()[3].pause();
  fleet()[4].pause();
  const auto result = run({"run", "--ttl", "1s", resource, "--", "sleep", "0.5"});
  fleet()[3].resume();
  fleet()[4].resume();
  BOOST_TEST(result.exit_code == 0, result.err);
  const auto lines = lines_of(result.err);
  BOOST_TEST_REQUIRE(lines.size() == 3u, result.err);
  // "so far" unless the stopped nodes' votes had already timed out when the lock was granted
  // (a slow, sanitized build can take that long to connect to the others).
  BOOST_TEST((contains(lines[0], " ms, granted by 3 of 5 nodes so far, quorum 3)") ||
              contains(lines[0], " ms, granted by 3 of 5 nodes, quorum 3)")),
             lines[0]);
  // Once the stopped nodes' votes have failed, the library's account follows, while COMMAND runs.
  BOOST_TEST(lines[1].starts_with("redlock: warning: \"" + resource +
                                  "\" acquired on 3 of 5 nodes (quorum 3): "),
             lines[1]);
  BOOST_TEST(contains(lines[2], "redlock: released " + resource), lines[2]);
  // Nothing reached the stopped nodes but the handshake; what the others had is released.
  BOOST_TEST(eventually_blocking([&] { return nothing_left(); }, 3000ms));
  check_nothing_left();
}

BOOST_AUTO_TEST_CASE(misconfigured_nodes_are_named_not_unreachable) {
  // Two servers with a password for the default user and an ACL user "bob" who may not run
  // EVALSHA (which the release and the renewal need).
  redis_server_options options;
  options.password = "right";
  options.acl_users = {"bob on >pw ~* &* +@all -evalsha"};
  redis_fleet acl(2, options);
  const auto bob = fmt::format("redis://bob:pw@127.0.0.1:{}", acl[0].port());
  const auto wrong = fmt::format("redis://:wrong@127.0.0.1:{}", acl[1].port());
  const auto good = fmt::format("redis://127.0.0.1:{}", fleet()[0].port());

  const auto status =
      run_tool({"status", "--nodes", fmt::format("{},{},{}", good, bob, wrong), resource}, {},
               scratch.path());
  BOOST_TEST(status.exit_code == 1, status.out);  // one usable node of three: no verdict
  auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 5u, status.out);
  BOOST_TEST(contains(lines[0], "reachable    free"), lines[0]);
  BOOST_TEST(lines[1].starts_with(fmt::format("127.0.0.1:{}", acl[0].port())), lines[1]);
  BOOST_TEST(contains(lines[1],
                      "misconfigured permission denied: ACL user \"bob\" may not run "
                      "EVALSHA"),
             lines[1]);
  BOOST_TEST(contains(lines[2], "misconfigured cannot log in"), lines[2]);
  BOOST_TEST(!contains(status.out, "unreachable  "), status.out);
  BOOST_TEST(!contains(status.out, "unreachable nodes"), status.out);
  BOOST_TEST(contains(lines[3], "unknown: only 1 of 3 nodes usable (2 misconfigured)"), lines[3]);
  BOOST_TEST(lines[4].starts_with("misconfigured nodes: 2"), lines[4]);

  // A quorum of usable nodes gives a verdict; the misconfigured and unreachable nodes are
  // counted apart.
  refusing_ports closed(1);
  const auto good_too = fmt::format("redis://127.0.0.1:{}", fleet()[1].port());
  const auto mixed = run_tool({"status", "--nodes",
                               fmt::format("{},{},{},{},{}", good, good_too,
                                           fmt::format("redis://127.0.0.1:{}", fleet()[2].port()),
                                           bob, node_urls(closed.ports())),
                               resource},
                              {}, scratch.path());
  BOOST_TEST(mixed.exit_code == 0, mixed.out);
  lines = lines_of(mixed.out);
  BOOST_TEST_REQUIRE(lines.size() == 8u, mixed.out);
  BOOST_TEST(contains(lines[3], "misconfigured permission denied"), lines[3]);
  BOOST_TEST(contains(lines[4], "unreachable  "), lines[4]);
  BOOST_TEST(lines[5] == resource + ": held on 0 of 5 nodes (quorum 3): free", lines[5]);
  BOOST_TEST(lines[6] == "unreachable nodes: 1");
  BOOST_TEST(lines[7].starts_with("misconfigured nodes: 1"), lines[7]);

  // `run` with such nodes fails at once, not after --wait, with the generic failure code (not
  // the conflict code: retrying cannot help) and the library's account of the nodes. The round is
  // decided by the first node to fail, so each kind of failure gets nodes of its own.
  const auto marker = scratch / "ran";
  const auto bob_too = fmt::format("redis://bob:pw@127.0.0.1:{}", acl[1].port());
  const auto wrong_too = fmt::format("redis://:wrong@127.0.0.1:{}", acl[0].port());
  struct refusal_case {
    std::string nodes;
    std::string_view reason;
  };
  for (const auto& c : {refusal_case{bob + "," + bob_too, "may not run EVALSHA"},
                        refusal_case{wrong + "," + wrong_too, "cannot log in"}}) {
    BOOST_TEST_CONTEXT("expecting " << c.reason) {
      const auto refused =
          run_tool({"run", "--nodes", c.nodes, "--wait", "10s", "--conflict-exit-code", "3",
                    resource, "--", "touch", marker.string()},
                   {}, scratch.path(), 20s);
      BOOST_TEST(refused.exit_code == cli::exit_code::failure, refused.err);
      BOOST_TEST(refused.took.count() < 5000);
      BOOST_TEST(count_lines(refused.err) == 1u, refused.err);
      BOOST_TEST(contains(refused.err, "misconfigured nodes, not retried"), refused.err);
      BOOST_TEST(contains(refused.err, c.reason), refused.err);
    }
  }
  BOOST_TEST(!std::filesystem::exists(marker));
  check_nothing_left();
}

// --permits 2: of three runs started together, two run their COMMAND at once and the third waits
// for one of them; never three at once, and two at once never under the same permit. Each
// COMMAND writes its $REDLOCK_PERMIT and the times it started and ended to a file of its own.
BOOST_AUTO_TEST_CASE(permits_bound_how_many_commands_run_at_once) {
  const auto record = [](const std::filesystem::path& file) {
    return fmt::format(
        "echo $REDLOCK_PERMIT >> {0}; date +%s%N >> {0}; sleep 0.8; date +%s%N >> {0}",
        file.string());
  };
  constexpr std::size_t runs = 3;
  std::vector<std::filesystem::path> files;
  std::vector<std::unique_ptr<tool_process>> started;
  for (std::size_t i = 0; i < runs; ++i) {
    files.push_back(scratch / fmt::format("run-{}", i));
    started.push_back(std::make_unique<tool_process>(
        std::vector<std::string>{"run", "--permits", "2", resource, "--", "sh", "-c",
                                 record(files.back())},
        nodes, scratch.path()));
  }
  struct interval {
    long long permit, start, end;
  };
  std::vector<interval> ran;
  for (std::size_t i = 0; i < runs; ++i) {
    BOOST_TEST_CONTEXT("run " << i) {
      const auto result = started[i]->wait(20s);
      BOOST_TEST(result.exit_code == 0, result.err);
      // The acquired line names the permit (0 or 1) and its key; the released line the permit.
      BOOST_TEST(contains(result.err, "redlock: acquired " + resource + " permit "), result.err);
      BOOST_TEST((contains(result.err, " permit 0 of 0..1 (key " + slot_key(resource, 0) + ", ") ||
                  contains(result.err, " permit 1 of 0..1 (key " + slot_key(resource, 1) + ", ")),
                 result.err);
      // Runs that raced for one slot may each have had some of its nodes: "granted by 3 of 5".
      BOOST_TEST(contains(result.err, " of 5 nodes, quorum 3)"), result.err);
      BOOST_TEST(contains(result.err, "redlock: released " + resource + " permit "), result.err);
      const auto numbers = numbers_in(files[i]);
      BOOST_TEST_REQUIRE(numbers.size() == 3u, "COMMAND did not run to its end");
      BOOST_TEST((numbers[0] == 0 || numbers[0] == 1), "REDLOCK_PERMIT=" << numbers[0]);
      BOOST_TEST(numbers[2] - numbers[1] >= 700'000'000LL);
      ran.push_back({numbers[0], numbers[1], numbers[2]});
    }
  }

  // The most COMMANDs running at any moment: +1 at each start, -1 at each end, an end first
  // where one ends as another starts.
  std::vector<std::pair<long long, int>> events;
  for (const auto& r : ran) {
    events.emplace_back(r.start, 1);
    events.emplace_back(r.end, -1);
  }
  std::sort(events.begin(), events.end());
  int running = 0;
  int most = 0;
  for (const auto& [at, change] : events) {
    running += change;
    most = std::max(most, running);
  }
  BOOST_TEST(most <= 2, most << " COMMANDs ran at once with 2 permits");
  // Two permits are two, not one: the first two runs do not wait for each other.
  BOOST_TEST(most == 2, "the COMMANDs ran one at a time");
  for (std::size_t i = 0; i < ran.size(); ++i) {
    for (std::size_t j = i + 1; j < ran.size(); ++j) {
      const bool overlap = ran[i].start < ran[j].end && ran[j].start < ran[i].end;
      BOOST_TEST((!overlap || ran[i].permit != ran[j].permit),
                 "runs " << i << " and " << j << " held permit " << ran[i].permit << " at once");
    }
  }
  check_no_permit_left(2);

  // Without --permits, a REDLOCK_PERMIT inherited from an enclosing run is not passed on.
  ::setenv("REDLOCK_PERMIT", "7", 1);
  const auto plain = run(
      {"run", "--quiet", resource, "--", "sh", "-c", "echo \"permit=${REDLOCK_PERMIT-none}\" >&2"});
  ::unsetenv("REDLOCK_PERMIT");
  BOOST_TEST(plain.exit_code == 0, plain.err);
  BOOST_TEST(contains(plain.err, "permit=none"), plain.err);
  check_nothing_left();
}

// --read: runs share the read-write lock, their COMMANDs at the same time; --write: a COMMAND runs
// alone, never beside a reader. Each reader's COMMAND waits (at most 5 s) until the other's has
// started, so two readers that could not share would show as one run after the other; the writer
// starts once both readers hold, and must wait for both to end.
BOOST_AUTO_TEST_CASE(readers_run_together_and_a_writer_alone) {
  const std::vector<std::filesystem::path> files = {scratch / "rw-0", scratch / "rw-1",
                                                    scratch / "rw-2"};
  const auto reader = [&](std::size_t mine, std::size_t other) {
    return fmt::format(
        "date +%s%N >> {0}; i=0; while [ ! -s {1} ] && [ $i -lt 50 ]; do sleep 0.1; "
        "i=$((i+1)); done; sleep 0.2; date +%s%N >> {0}",
        files[mine].string(), files[other].string());
  };
  const auto writer =
      fmt::format("date +%s%N >> {0}; sleep 0.2; date +%s%N >> {0}", files[2].string());
  const std::vector<std::string> sides = {"--read", "--read", "--write"};
  const std::vector<std::string> commands = {reader(0, 1), reader(1, 0), writer};
  std::vector<std::unique_ptr<tool_process>> started;
  const auto start = [&](std::size_t i) {
    started.push_back(std::make_unique<tool_process>(
        std::vector<std::string>{"run", sides[i], resource, "--", "sh", "-c", commands[i]}, nodes,
        scratch.path()));
  };
  start(0);
  start(1);
  for (int tries = 0; tries < 200 && (numbers_in(files[0]).empty() || numbers_in(files[1]).empty());
       ++tries)
    std::this_thread::sleep_for(50ms);
  start(2);
  std::vector<std::pair<long long, long long>> ran;
  for (std::size_t i = 0; i < sides.size(); ++i) {
    BOOST_TEST_CONTEXT("run " << i << " " << sides[i]) {
      const auto result = started[i]->wait(30s);
      BOOST_TEST(result.exit_code == 0, result.err);
      const std::string how = i < 2 ? " for reading (key " + rw_readers_key(resource)
                                    : " for writing (key " + rw_writer_key(resource);
      BOOST_TEST(contains(result.err, "redlock: acquired " + resource + how + ", "), result.err);
      const auto numbers = numbers_in(files[i]);
      BOOST_TEST_REQUIRE(numbers.size() == 2u, "COMMAND did not run to its end");
      ran.emplace_back(numbers[0], numbers[1]);
    }
  }
  const auto overlap = [&](std::size_t a, std::size_t b) {
    return ran[a].first < ran[b].second && ran[b].first < ran[a].second;
  };
  BOOST_TEST(overlap(0, 1), "the readers ran one at a time");
  BOOST_TEST(ran[2].first >= ran[0].second, "the writer ran beside reader 0");
  BOOST_TEST(ran[2].first >= ran[1].second, "the writer ran beside reader 1");
  // A release completes on a quorum's answers; the last node's may land a moment later.
  for (const auto& key :
       {rw_readers_key(resource), rw_writer_key(resource), rw_mark_key(resource)}) {
    std::size_t left = look.present(key);
    for (int tries = 0; left != 0 && tries < 100; ++tries) {
      std::this_thread::sleep_for(20ms);
      left = look.present(key);
    }
    BOOST_TEST(left == 0u, key);
  }
}

// run A B: every key of the set held with one token on every node while COMMAND runs; with
// --fencing COMMAND gets one token per RESOURCE in the order given, and none in the singular;
// the release frees every key.
BOOST_AUTO_TEST_CASE(a_run_of_several_resources_holds_them_all) {
  const std::string first = resource + ":b";
  const std::string second = resource + ":a";
  const auto ready = scratch / "ready";
  const auto go_on = scratch / "go-on";
  ::setenv("REDLOCK_FENCING_TOKEN", "17", 1);
  tool_process holder(
      {"run", "--fencing", first, second, first, "--", "sh", "-c",
       fmt::format(
           "echo \"$REDLOCK_TOKEN ${{REDLOCK_FENCING_TOKEN-none}} $REDLOCK_FENCING_TOKENS\" "
           "> {0}.tmp; mv {0}.tmp {0}; i=0; while [ ! -e {1} ] && [ $i -lt 100 ]; do "
           "sleep 0.1; i=$((i+1)); done",
           ready.string(), go_on.string())},
      nodes, scratch.path());
  ::unsetenv("REDLOCK_FENCING_TOKEN");
  BOOST_TEST_REQUIRE(eventually_blocking([&] { return std::filesystem::exists(ready); }, 10000ms));
  std::string token;
  std::string singular;
  unsigned long long first_fence = 0;
  unsigned long long second_fence = 0;
  std::ifstream(ready) >> token >> singular >> first_fence >> second_fence;
  BOOST_TEST(token.size() == 40u, token);
  BOOST_TEST(singular == "none");
  BOOST_TEST(first_fence > 0u);
  BOOST_TEST(second_fence > 0u);
  // An acquire completes on a quorum; the last node's grant may land a moment later.
  for (const auto& key : {first, second}) {
    BOOST_TEST(eventually_blocking([&] { return look.holding(key, token) == 5u; }, 2000ms), key);
  }
  std::ofstream(go_on.string()) << "done\n";
  const auto result = holder.wait(20s);
  BOOST_TEST(result.exit_code == 0, result.err);
  BOOST_TEST(
      contains(result.err, fmt::format("redlock: acquired {} and {} (valid ", first, second)),
      result.err);
  BOOST_TEST(contains(result.err, fmt::format(", fencing tokens {} {}, {} {})", first, first_fence,
                                              second, second_fence)),
             result.err);
  BOOST_TEST(contains(result.err, fmt::format("redlock: released {} and {} after ", first, second)),
             result.err);
  for (const auto& key : {first, second}) {
    BOOST_TEST(eventually_blocking([&] { return look.present(key) == 0u; }, 2000ms), key);
  }

  // The next run of the same set gets greater tokens for both.
  const auto again = run({"run", "--fencing", second, first, "--", "sh", "-c",
                          "echo \"fences=$REDLOCK_FENCING_TOKENS\" >&2"});
  BOOST_TEST_REQUIRE(again.exit_code == 0, again.err);
  const auto at = again.err.find("fences=");
  BOOST_TEST_REQUIRE(at != std::string::npos, again.err);
  std::istringstream fences(again.err.substr(at + 7));
  unsigned long long second_again = 0;
  unsigned long long first_again = 0;
  fences >> second_again >> first_again;
  BOOST_TEST(first_again > first_fence);
  BOOST_TEST(second_again > second_fence);
}

// One RESOURCE of the set held by another owner: nothing runs, no key of the set is set anywhere,
// and the other owner's key is untouched; the text line and the --json object name the set.
BOOST_AUTO_TEST_CASE(a_run_of_a_set_with_one_resource_held_elsewhere_runs_nothing) {
  const std::string free = resource + ":free";
  set_everywhere("someone-else");
  const auto marker = scratch / "ran";
  const auto held = run({"run", "--wait", "300ms", free, resource, "--", "touch", marker.string()});
  BOOST_TEST(held.exit_code == cli::exit_code::not_acquired, held.err);
  BOOST_TEST(count_lines(held.err) == 1u, held.err);
  BOOST_TEST(
      contains(held.err, fmt::format("redlock: \"{}\" and \"{}\" not acquired", free, resource)),
      held.err);
  BOOST_TEST(contains(held.err, "contended"), held.err);
  const auto json =
      run({"run", "--json", "--wait", "0", free, resource, "--", "touch", marker.string()});
  BOOST_TEST(json.exit_code == cli::exit_code::not_acquired, json.err);
  const auto lines = lines_of(json.err);
  BOOST_TEST_REQUIRE(lines.size() == 1u, json.err);
  BOOST_TEST(is_json_object(lines[0]), lines[0]);
  BOOST_TEST(lines[0].starts_with("{" + json_field("event", "not_acquired") + ",\"resources\":[" +
                                  json_string_of(free) + "," + json_string_of(resource) + "]," +
                                  json_field("reason", "contended")),
             lines[0]);
  BOOST_TEST(!std::filesystem::exists(marker));
  BOOST_TEST(look.present(free) == 0u);
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();
}

// run --json of a set: "resources" in place of "resource", and the tokens per RESOURCE.
BOOST_AUTO_TEST_CASE(run_json_of_a_set_names_every_resource) {
  const std::string other = resource + ":other";
  const auto result = run({"run", "--json", "--fencing", resource, other, "--", "true"});
  BOOST_TEST_REQUIRE(result.exit_code == 0, result.err);
  const auto lines = lines_of(result.err);
  BOOST_TEST_REQUIRE(lines.size() == 2u, result.err);
  const std::string resources =
      ",\"resources\":[" + json_string_of(resource) + "," + json_string_of(other) + "],";
  BOOST_TEST(is_json_object(lines[0]), lines[0]);
  BOOST_TEST(lines[0].starts_with("{" + json_field("event", "acquired") + resources +
                                  "\"permit\":null,\"key\":null,\"token\":"),
             lines[0]);
  BOOST_TEST(contains(lines[0], ",\"fencing_token\":null,\"fencing_tokens\":["), lines[0]);
  BOOST_TEST(is_json_object(lines[1]), lines[1]);
  BOOST_TEST(lines[1].starts_with("{" + json_field("event", "released") + resources), lines[1]);
  check_nothing_left();
  BOOST_TEST(eventually_blocking([&] { return look.present(other) == 0u; }, 2000ms));
}

// Runs of {x, y}, {y, x} and {y} started together: each waits its turn (no deadlock, whatever
// the order of the names) and no two of them ran at the same time.
BOOST_AUTO_TEST_CASE(runs_of_overlapping_sets_take_turns) {
  const std::string x = resource + ":x";
  const std::string y = resource + ":y";
  const std::vector<std::vector<std::string>> sets = {{x, y}, {y, x}, {y}};
  std::vector<std::filesystem::path> files;
  std::vector<std::unique_ptr<tool_process>> started;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    files.push_back(scratch / fmt::format("set-{}", i));
    std::vector<std::string> args = {"run", "--wait", "20s"};
    args.insert(args.end(), sets[i].begin(), sets[i].end());
    const std::vector<std::string> command = {
        "--", "sh", "-c",
        fmt::format("date +%s%N >> {0}; sleep 0.3; date +%s%N >> {0}", files[i].string())};
    args.insert(args.end(), command.begin(), command.end());
    started.push_back(std::make_unique<tool_process>(args, nodes, scratch.path()));
  }
  std::vector<std::pair<long long, long long>> ran;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    BOOST_TEST_CONTEXT("run " << i) {
      const auto result = started[i]->wait(40s);
      BOOST_TEST(result.exit_code == 0, result.err);
      const auto numbers = numbers_in(files[i]);
      BOOST_TEST_REQUIRE(numbers.size() == 2u, "COMMAND did not run to its end");
      ran.emplace_back(numbers[0], numbers[1]);
    }
  }
  for (std::size_t a = 0; a < ran.size(); ++a) {
    for (std::size_t b = a + 1; b < ran.size(); ++b) {
      BOOST_TEST((ran[a].second <= ran[b].first || ran[b].second <= ran[a].first),
                 "runs " << a << " and " << b << " overlapped");
    }
  }
  for (const auto& key : {x, y}) {
    BOOST_TEST(eventually_blocking([&] { return look.present(key) == 0u; }, 2000ms), key);
  }
}

// status --permits: one block per slot as for a lock (a line per node, then the verdict on that
// slot's key), then how many permits are held; here one of two, by a run of the tool.
BOOST_AUTO_TEST_CASE(status_with_permits_shows_each_slot) {
  const auto ready = scratch / "ready";
  tool_process holder({"run", "--permits", "2", resource, "--", "sh", "-c",
                       fmt::format("echo \"$REDLOCK_PERMIT $REDLOCK_TOKEN\" > {0}.tmp; "
                                   "mv {0}.tmp {0}; exec sleep 30",
                                   ready.string())},
                      nodes, scratch.path());
  BOOST_TEST_REQUIRE(eventually_blocking([&] { return std::filesystem::exists(ready); }, 10000ms));
  std::size_t held = 0;
  std::string token;
  std::ifstream(ready) >> held >> token;
  BOOST_TEST_REQUIRE(held < 2u);
  const std::size_t other = 1 - held;
  // COMMAND's REDLOCK_TOKEN is what the permit's key holds on every node.
  BOOST_TEST_REQUIRE(look.holding(slot_key(resource, held), token) == 5u);
  BOOST_TEST(look.present(slot_key(resource, other)) == 0u);

  const auto status = run({"status", "--permits", "2", resource});
  BOOST_TEST(status.exit_code == 0, status.err);
  const auto lines = lines_of(status.out);
  // Per slot 5 node lines and a verdict, an empty line after each block, then the summary.
  BOOST_TEST_REQUIRE(lines.size() == 15u, status.out);
  const auto block = [&](std::size_t slot) { return std::span(lines).subspan(slot * 7, 7); };
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      const auto& held_line = block(held)[i];
      BOOST_TEST(held_line.starts_with(fmt::format("127.0.0.1:{}", fleet()[i].port())), held_line);
      BOOST_TEST(contains(held_line, "reachable    held  ttl "), held_line);
      BOOST_TEST(contains(held_line, "token " + token.substr(0, 8)), held_line);
      BOOST_TEST(contains(block(other)[i], "reachable    free"), block(other)[i]);
    }
  }
  BOOST_TEST(block(held)[5] == fmt::format("{}: held on 5 of 5 nodes (quorum 3): locked (token {})",
                                           slot_key(resource, held), token.substr(0, 8)));
  BOOST_TEST(block(other)[5] ==
             fmt::format("{}: held on 0 of 5 nodes (quorum 3): free", slot_key(resource, other)));
  BOOST_TEST(lines[6].empty());
  BOOST_TEST(lines[13].empty());
  BOOST_TEST(lines[14] == resource + ": 1 of 2 permits held (quorum 3 of 5 nodes)");

  holder.signal(SIGTERM);
  const auto ended = holder.wait(10s);
  BOOST_TEST(ended.exit_code == 128 + SIGTERM, ended.err);
  BOOST_TEST(contains(ended.err, fmt::format("redlock: released {} permit {}", resource, held)),
             ended.err);
  check_no_permit_left(2);
  const auto after = run({"status", "--permits", "2", resource});
  BOOST_TEST(contains(after.out, resource + ": 0 of 2 permits held (quorum 3 of 5 nodes)"),
             after.out);
}

// Every permit held elsewhere: contended, with the same exit codes as a lock held elsewhere, and
// the other owners' keys are left alone.
BOOST_AUTO_TEST_CASE(a_semaphore_with_every_permit_held_is_not_acquired) {
  for (std::size_t slot = 0; slot < 2; ++slot) {
    for (std::size_t i = 0; i < fleet().size(); ++i)
      look.set(i, slot_key(resource, slot), "someone-else", 20s);
  }
  const auto marker = scratch / "ran";
  const auto once =
      run({"run", "--permits", "2", "--wait", "0", resource, "--", "touch", marker.string()}, 10s);
  BOOST_TEST(once.exit_code == cli::exit_code::not_acquired, once.err);
  BOOST_TEST(count_lines(once.err) == 1u, once.err);
  BOOST_TEST(
      contains(once.err, "redlock: \"" + resource +
                             "\" not acquired: contended: all 2 permits held by other owners"),
      once.err);
  const auto waited = run({"run", "--permits", "2", "--wait", "300ms", "--conflict-exit-code", "3",
                           resource, "--", "touch", marker.string()},
                          10s);
  BOOST_TEST(waited.exit_code == 3, waited.err);
  BOOST_TEST(contains(waited.err, "contended"), waited.err);
  BOOST_TEST(!std::filesystem::exists(marker));
  for (std::size_t slot = 0; slot < 2; ++slot) {
    BOOST_TEST(look.holding(slot_key(resource, slot), "someone-else") == 5u);
    for (std::size_t i = 0; i < fleet().size(); ++i)
      sync_client(fleet()[i].port()).command({"DEL", slot_key(resource, slot)});
  }
  check_no_permit_left(2);
}

// The largest semaphore, every permit held elsewhere: each refusal names all 1024 slots on every
// node, and must still read as contended (not a broken connection and no quorum).
BOOST_AUTO_TEST_CASE(the_largest_semaphore_full_is_contended) {
  constexpr std::size_t permits = 1024;
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    sync_client c(fleet()[i].port());
    for (std::size_t slot = 0; slot < permits; ++slot)
      c.command({"SET", slot_key(resource, slot), "someone-else", "PX", "20000"});
  }
  const auto marker = scratch / "ran";
  for (const std::string wait : {"0", "500ms"}) {
    BOOST_TEST_CONTEXT("--wait " << wait) {
      const auto refused = run(
          {"run", "--permits", "1024", "--wait", wait, resource, "--", "touch", marker.string()},
          10s);
      BOOST_TEST(refused.exit_code == cli::exit_code::not_acquired, refused.err);
      BOOST_TEST(contains(refused.err, "contended: all 1024 permits held by other owners"),
                 refused.err);
      BOOST_TEST(!contains(refused.err, "no quorum"), refused.err);
      BOOST_TEST(!contains(refused.err, "protocol"), refused.err);
    }
  }
  BOOST_TEST(!std::filesystem::exists(marker));
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    sync_client c(fleet()[i].port());
    for (std::size_t slot = 0; slot < permits; ++slot)
      c.command({"DEL", slot_key(resource, slot)});
  }
}

// A script of several steps: acquire prints the token and leaves the lock on the nodes after it
// exited, unrenewed; extend by that token raises its TTL, a wrong token changes nothing; release
// by the token deletes it everywhere, and then there is nothing left to extend or release.
BOOST_AUTO_TEST_CASE(acquire_extend_release_by_token) {
  const auto acquired = run({"acquire", "--ttl", "10s", resource});
  BOOST_TEST_REQUIRE(acquired.exit_code == 0, acquired.err);
  BOOST_TEST_REQUIRE(count_lines(acquired.out) == 1u, acquired.out);
  const std::string token = lines_of(acquired.out)[0];
  BOOST_TEST_REQUIRE(is_token(token), token);
  // stderr: for how long, and the commands to extend and release it, token included.
  BOOST_TEST(contains(acquired.err, "redlock: acquired " + resource + " (valid "), acquired.err);
  BOOST_TEST(contains(acquired.err, "granted by 5 of 5 nodes, quorum 3); nobody renews it"),
             acquired.err);
  BOOST_TEST(contains(acquired.err,
                      fmt::format("redlock extend {} --token {} --ttl 10s", resource, token)),
             acquired.err);
  BOOST_TEST(contains(acquired.err, fmt::format("redlock release {} --token {}", resource, token)),
             acquired.err);
  BOOST_TEST(look.holding(resource, token) == 5u);
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      const auto ttl = look.pttl(i, resource);
      BOOST_TEST((ttl > 0 && ttl <= 10000), ttl);
    }
  }

  const auto extended = run({"extend", resource, "--token", token, "--ttl", "60s"});
  BOOST_TEST(extended.exit_code == 0, extended.err);
  BOOST_TEST(contains(extended.err, "redlock: extended " + resource), extended.err);
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      const auto ttl = look.pttl(i, resource);
      BOOST_TEST((ttl > 10000 && ttl <= 60000), ttl);
    }
  }

  // Someone else's token: 3, saying whose it is, and the key stays as it was.
  const auto wrong = run({"extend", resource, "--token", std::string(40, 'f'), "--ttl", "1s"});
  BOOST_TEST(wrong.exit_code == cli::exit_code::not_held, wrong.err);
  BOOST_TEST(count_lines(wrong.err) == 1u, wrong.err);
  BOOST_TEST(contains(wrong.err,
                      "is not held by token ffffffff: it is held by another owner now "
                      "(token " +
                          token.substr(0, 8) + ")"),
             wrong.err);
  BOOST_TEST(look.holding(resource, token) == 5u);
  BOOST_TEST(look.pttl(0, resource) > 10000);
  const auto wrong_release = run({"release", resource, "--token", std::string(40, 'f')});
  BOOST_TEST(wrong_release.exit_code == cli::exit_code::not_held, wrong_release.err);
  BOOST_TEST(look.holding(resource, token) == 5u);

  // Held: another acquire is refused as run would be, with run's codes.
  const auto refused = run({"acquire", "--wait", "0", resource});
  BOOST_TEST(refused.exit_code == cli::exit_code::not_acquired, refused.err);
  BOOST_TEST(refused.out.empty(), refused.out);
  BOOST_TEST(count_lines(refused.err) == 1u, refused.err);
  BOOST_TEST(contains(refused.err, "redlock: \"" + resource + "\" not acquired: contended"),
             refused.err);
  const auto conflict =
      run({"acquire", "--wait", "300ms", "--conflict-exit-code", "4", resource}, 10s);
  BOOST_TEST(conflict.exit_code == 4, conflict.err);
  BOOST_TEST(look.holding(resource, token) == 5u);

  const auto released = run({"release", resource, "--token", token});
  BOOST_TEST(released.exit_code == 0, released.err);
  BOOST_TEST(contains(released.err, "redlock: released " + resource), released.err);
  check_nothing_left();

  // Gone: nothing to release or extend, and the line says it is gone.
  const auto again = run({"release", resource, "--token", token});
  BOOST_TEST(again.exit_code == cli::exit_code::not_held, again.err);
  BOOST_TEST(contains(again.err, "it is gone from every node that answered"), again.err);
  const auto late = run({"extend", resource, "--token", token, "--ttl", "10s"});
  BOOST_TEST(late.exit_code == cli::exit_code::not_held, late.err);
  check_nothing_left();

  // --quiet: the token alone, on stdout.
  const auto quiet = run({"acquire", "-q", "--ttl", "5s", resource});
  BOOST_TEST(quiet.exit_code == 0, quiet.err);
  BOOST_TEST(quiet.err.empty(), quiet.err);
  BOOST_TEST(is_token(lines_of(quiet.out).at(0)), quiet.out);
  const auto quiet_release = run({"release", "-q", resource, "--token", lines_of(quiet.out).at(0)});
  BOOST_TEST(quiet_release.exit_code == 0, quiet_release.err);
  BOOST_TEST(quiet_release.err.empty(), quiet_release.err);
  check_nothing_left();
}

// --json: each command prints one JSON object on stdout, whatever the outcome.
BOOST_AUTO_TEST_CASE(acquire_extend_release_json) {
  const auto acquired = run({"acquire", "--json", "--fencing", "--ttl", "20s", resource});
  BOOST_TEST_REQUIRE(acquired.exit_code == 0, acquired.err);
  BOOST_TEST(acquired.err.empty(), acquired.err);
  BOOST_TEST_REQUIRE(count_lines(acquired.out) == 1u, acquired.out);
  BOOST_TEST(json_lines(acquired.out), acquired.out);
  const std::string object = lines_of(acquired.out).at(0);
  const std::string token = json_text(object, "token");
  BOOST_TEST_REQUIRE(is_token(token), object);
  BOOST_TEST(object.starts_with("{" + json_field("event", "acquired") + "," +
                                json_field("resource", resource) + "," +
                                json_field("token", token) + ",\"fencing_token\":"),
             object);
  BOOST_TEST(json_number(object, "fencing_token") >= 0, object);
  const auto validity = json_number(object, "validity_ms");
  BOOST_TEST((validity > 0 && validity <= 20000), object);
  BOOST_TEST(contains(object, "\"ttl_ms\":20000,\"granted_nodes\":5,\"nodes\":5,\"quorum\":3}"),
             object);
  BOOST_TEST(look.holding(resource, token) == 5u);

  const auto refused = run({"acquire", "--json", "--wait", "0", resource});
  BOOST_TEST(refused.exit_code == cli::exit_code::not_acquired, refused.err);
  BOOST_TEST(refused.err.empty(), refused.err);
  BOOST_TEST(count_lines(refused.out) == 1u, refused.out);
  BOOST_TEST(json_lines(refused.out), refused.out);
  BOOST_TEST(refused.out.starts_with("{" + json_field("event", "not_acquired") + "," +
                                     json_field("resource", resource) + "," +
                                     json_field("reason", "contended") + ",\"exit_code\":75,"),
             refused.out);

  struct step {
    std::vector<std::string> args;
    int exit_code;
    std::string_view event;
  };
  const std::vector<step> steps = {
      {{"extend", "--json", resource, "--token", token, "--ttl", "30s"}, 0, "extended"},
      {{"extend", "--json", resource, "--token", "someone-else", "--ttl", "30s"}, 3, "not_held"},
      {{"release", "--json", resource, "--token", token}, 0, "released"},
      {{"release", "--json", resource, "--token", token}, 3, "not_held"},
      {{"extend", "--json", "-q", resource, "--token", token, "--ttl", "30s"}, 3, "not_held"},
  };
  for (const auto& s : steps) {
    BOOST_TEST_CONTEXT(s.args.front() << " expecting " << s.event) {
      const auto result = run(s.args);
      BOOST_TEST(result.exit_code == s.exit_code, result.err);
      BOOST_TEST(result.err.empty(), result.err);
      BOOST_TEST(count_lines(result.out) == 1u, result.out);
      BOOST_TEST(json_lines(result.out), result.out);
      BOOST_TEST(result.out.starts_with(
                     "{" + json_field("event", s.event) + "," + json_field("resource", resource) +
                     fmt::format(",\"exit_code\":{},\"message\":\"", s.exit_code)),
                 result.out);
    }
  }
  check_nothing_left();
}

// Without a terminal nobody can answer the question: --force without --yes refuses, before it
// asks the nodes anything.
BOOST_AUTO_TEST_CASE(release_force_needs_yes_without_a_terminal) {
  set_everywhere("someone-else");
  const auto refused = run({"release", "--force", resource});
  BOOST_TEST(refused.exit_code == cli::exit_code::usage, refused.err);
  BOOST_TEST(count_lines(refused.err) == 1u, refused.err);
  BOOST_TEST(contains(refused.err, "--force needs --yes when stdin is not a terminal"),
             refused.err);
  BOOST_TEST(refused.out.empty(), refused.out);
  BOOST_TEST(look.holding(resource, "someone-else") == 5u);
  delete_everywhere();
  check_nothing_left();
}

// --force --yes: every holder's key is released by its token (the lock's holder and a leftover
// below quorum alike); a key that is not a lock is left alone; the record names who and what.
BOOST_AUTO_TEST_CASE(release_force_yes_deletes_every_holder_and_says_who) {
  const std::string holder = "holder-one-token";
  const std::string leftover = "leftover-token";
  for (std::size_t i = 0; i < 3; ++i)
    look.set(i, resource, holder, 20s);
  look.set(3, resource, leftover, 20s);
  sync_client(fleet()[4].port()).command({"RPUSH", resource, "not-a-lock"});

  const auto forced = run({"release", "--force", "--yes", resource});
  BOOST_TEST(forced.exit_code == 0, forced.err);
  BOOST_TEST(forced.out.empty(), forced.out);
  const auto lines = lines_of(forced.err);
  const auto record = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
    return contains(line, " released \"" + resource + "\" by force: ");
  });
  BOOST_TEST_REQUIRE((record != lines.end()), forced.err);
  BOOST_TEST(contains(*record, effective_user()), *record);
  BOOST_TEST(contains(*record, " on " + this_host() + " released "), *record);
  BOOST_TEST(contains(*record,
                      fmt::format("token {} on 127.0.0.1:{},127.0.0.1:{},127.0.0.1:{} "
                                  "(released)",
                                  holder, fleet()[0].port(), fleet()[1].port(), fleet()[2].port())),
             *record);
  BOOST_TEST(contains(*record, fmt::format("token {} on 127.0.0.1:{} (released)", leftover,
                                           fleet()[3].port())),
             *record);
  BOOST_TEST(
      contains(*record, fmt::format("not a lock, left alone on 127.0.0.1:{}", fleet()[4].port())),
      *record);
  BOOST_TEST(contains(forced.err,
                      fmt::format("redlock: note: 127.0.0.1:{} holds a key {} of another type, "
                                  "not a lock: left alone",
                                  fleet()[4].port(), resource)),
             forced.err);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      BOOST_TEST(!look.get(i, resource).has_value());
    }
  }
  BOOST_TEST(sync_client(fleet()[4].port()).command({"TYPE", resource}).text == "list");
  sync_client(fleet()[4].port()).command({"DEL", resource});

  // Nothing left to release: 3. With --json, the one object; the record still on stderr.
  const auto nothing = run({"release", "--force", "--yes", "--json", resource});
  BOOST_TEST(nothing.exit_code == cli::exit_code::not_held, nothing.err);
  BOOST_TEST(json_lines(nothing.out), nothing.out);
  BOOST_TEST(nothing.out.starts_with("{" + json_field("event", "not_held")), nothing.out);

  set_everywhere(holder);
  const auto json = run({"release", "--force", "--yes", "--json", resource});
  BOOST_TEST(json.exit_code == 0, json.err);
  BOOST_TEST(count_lines(json.out) == 1u, json.out);
  BOOST_TEST(json_lines(json.out), json.out);
  BOOST_TEST(json.out.starts_with("{" + json_field("event", "released") + "," +
                                  json_field("resource", resource) + ",\"exit_code\":0,"),
             json.out);
  BOOST_TEST(contains(json.out, "\"tokens\":[\"" + holder + "\"]"), json.out);
  BOOST_TEST(contains(json.out, json_field("host", this_host())), json.out);
  BOOST_TEST(contains(json.err, " released \"" + resource + "\" by force: token " + holder),
             json.err);
  check_nothing_left();
}

// A lock another process holds, released by force: its holder finds it gone at its next step.
BOOST_AUTO_TEST_CASE(release_force_of_an_acquired_lock) {
  const auto acquired = run({"acquire", "-q", "--ttl", "30s", resource});
  BOOST_TEST_REQUIRE(acquired.exit_code == 0, acquired.err);
  const std::string token = lines_of(acquired.out).at(0);
  const auto forced = run({"release", "--force", "--yes", "-q", resource});
  BOOST_TEST(forced.exit_code == 0, forced.err);
  BOOST_TEST(count_lines(forced.err) == 1u, forced.err);  // -q: the record alone
  BOOST_TEST(contains(forced.err, "token " + token + " on "), forced.err);
  check_nothing_left();
  const auto extend = run({"extend", resource, "--token", token, "--ttl", "30s"});
  BOOST_TEST(extend.exit_code == cli::exit_code::not_held, extend.err);
  check_nothing_left();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tool_on_cluster_and_sentinel_nodes)

// A Redis Cluster as the one node: `run` holds the lock on the master of the resource's slot, and
// `status` names that master.
BOOST_AUTO_TEST_CASE(run_and_status_on_a_redis_cluster) {
  redlock::test::redis_cluster cluster;
  scratch_dir scratch;
  const std::string url = cluster.seeds_url();
  const std::string resource = "cli-on-a-cluster";
  const auto master = cluster.master_of_slot(cluster.key_slot(resource));
  const auto address = fmt::format("127.0.0.1:{}", cluster.port(master));

  const auto ran =
      run_tool({"run", resource, "--", "sh", "-c", "echo under the lock"}, url, scratch.path());
  BOOST_TEST(ran.exit_code == 0, ran.err);
  BOOST_TEST(contains(ran.out, "under the lock"), ran.out);

  const auto status = run_tool({"status", "--nodes", url, resource}, {}, scratch.path());
  BOOST_TEST(status.exit_code == 0, status.err);
  const auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 2u, status.out);
  BOOST_TEST(contains(lines[0], "reachable    free"), lines[0]);
  BOOST_TEST(contains(lines[0],
                      fmt::format("cluster, slot {} on {}", cluster.key_slot(resource), address)),
             lines[0]);
  BOOST_TEST(lines[1] == resource + ": held on 0 of 1 nodes (quorum 1): free", status.out);
  BOOST_TEST(cluster.dbsize(master) == 0);
}

namespace {

// The "since" of a status line's "master H:P since YYYY-MM-DD HH:MM:SS UTC", as a time; the
// epoch when the line has none.
std::chrono::system_clock::time_point master_since_in(const std::string& line) {
  const auto at = line.find(" since ");
  std::tm parts{};
  if (at == std::string::npos ||
      std::sscanf(line.c_str() + at, " since %d-%d-%d %d:%d:%d UTC", &parts.tm_year, &parts.tm_mon,
                  &parts.tm_mday, &parts.tm_hour, &parts.tm_min, &parts.tm_sec) != 6) {
    return {};
  }
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&parts));
}

}  // namespace

// A sentinel-managed master as the one node: `run` holds the lock on it, and `status` names it,
// says since when, and follows a failover.
BOOST_AUTO_TEST_CASE(run_and_status_on_a_sentinel_group) {
  redlock::test::redis_sentinel group;
  scratch_dir scratch;
  const std::string url = group.sentinel_url();
  const std::string resource = "cli-on-sentinels";

  const auto ran =
      run_tool({"run", resource, "--", "sh", "-c", "echo under the lock"}, url, scratch.path());
  BOOST_TEST(ran.exit_code == 0, ran.err);
  BOOST_TEST(contains(ran.out, "under the lock"), ran.out);

  const auto status_line = [&] {
    const auto status = run_tool({"status", "--nodes", url, resource}, {}, scratch.path());
    BOOST_TEST(status.exit_code == 0, status.err);
    const auto lines = lines_of(status.out);
    BOOST_TEST_REQUIRE(lines.size() == 2u, status.out);
    BOOST_TEST(lines[1] == resource + ": held on 0 of 1 nodes (quorum 1): free", status.out);
    return lines[0];
  };
  const auto before = status_line();
  BOOST_TEST(contains(before, "reachable    free"), before);
  BOOST_TEST(contains(before, fmt::format("sentinel, master 127.0.0.1:{} since ", group.port(0))),
             before);
  BOOST_TEST(contains(before, "config epoch 0"), before);
  // The sentinels have watched node 0 since they started, a few seconds ago.
  BOOST_TEST((master_since_in(before) > std::chrono::system_clock::now() - 120s), before);

  const auto failover_start = std::chrono::system_clock::now();
  const auto new_master = group.failover();
  const auto after = status_line();
  BOOST_TEST(
      contains(after, fmt::format("sentinel, master 127.0.0.1:{} since ", group.port(new_master))),
      after);
  BOOST_TEST(contains(after, "config epoch 1"), after);
  // Whole seconds: the switch is no earlier than the second the failover was asked in.
  BOOST_TEST((master_since_in(after) >= failover_start - 1s), after);
  BOOST_TEST((master_since_in(after) <= std::chrono::system_clock::now() + 1s), after);
}

BOOST_AUTO_TEST_SUITE_END()

// The built tool's --version, which needs no node: the OpenSSL it names is the one it runs, the
// system's, which this test process runs too.
BOOST_AUTO_TEST_SUITE(tool_version)

BOOST_AUTO_TEST_CASE(version_names_the_library_boost_and_the_openssl_it_runs) {
  scratch_dir scratch;
  const auto result = run_tool({"--version"}, {}, scratch.path());
  BOOST_TEST(result.exit_code == 0, result.err);
  BOOST_TEST(result.err.empty(), result.err);
  std::string boost = BOOST_LIB_VERSION;  // "1_81"
  std::replace(boost.begin(), boost.end(), '_', '.');
  BOOST_TEST(result.out.starts_with(fmt::format("redlock {0} (redlock-asio {0}, Boost {1}.",
                                                REDLOCK_VERSION_STRING, boost)),
             result.out);
  // "OpenSSL 3.0.17 1 Jul 2025": the name and the version, not the date.
  const std::string_view runs = OpenSSL_version(OPENSSL_VERSION);
  const auto openssl = runs.substr(0, runs.find(' ', runs.find(' ') + 1));
  BOOST_TEST(result.out.ends_with(fmt::format(", {})\n", openssl)), result.out);
}

BOOST_AUTO_TEST_SUITE_END()
