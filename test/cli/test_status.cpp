// `redlock status` as a user runs it, beyond a single lock: a read-write lock (--read/--write),
// several resources (a set), and nodes named by a URL of the wrong kind, against redis-server
// processes of the test's own. status only reads: the cases check that it changed no key.

#include "cli/tool_fixture.hpp"
#include "cli/tool_process.hpp"
#include "redlock/exit_codes.hpp"
#include "support/async_test.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_sentinel.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cli = redlock::cli;
using namespace std::chrono_literals;
using namespace redlock::test::cli_checks;
using redlock::test::eventually_blocking;
using redlock::test::run_tool;
using redlock::test::scratch_dir;
using redlock::test::sync_client;
using redlock::test::tool_process;
using redlock::test::tool_result;

// The first word in `file` (a token COMMAND wrote there), once it is there; empty after 10 s.
std::string token_written_to(const std::filesystem::path& file) {
  std::string token;
  eventually_blocking(
      [&] {
        std::ifstream in(file);
        return static_cast<bool>(in >> token) && is_token(token);
      },
      10000ms);
  return token;
}

// The node's clock in milliseconds (TIME), which readers' deadlines are on.
long long node_time_ms(std::uint16_t port) {
  const auto clock = sync_client(port).command({"TIME"});
  return std::stoll(clock.elements.at(0).text) * 1000 +
         std::stoll(clock.elements.at(1).text) / 1000;
}

// What a key holds on a node, as DUMP serializes it: equal before and after means unchanged.
std::string dump(std::uint16_t port, std::string_view key) {
  return sync_client(port).command({"DUMP", key}).text;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(status_kinds, tool_fixture)

// A reader in `run --read`: status --read (and --write) shows it on every node; status of the
// readers' key itself says that it is not a lock but a key of that read-write lock, where it
// said "not locked (below quorum)". A writer that then waits shows its marks, and new readers are
// kept out.
BOOST_AUTO_TEST_CASE(status_read_shows_a_running_reader_and_a_waiting_writer) {
  const auto token_file = scratch / "token";
  tool_process reader({"run", "--read", resource, "--", "sh", "-c",
                       fmt::format("echo $REDLOCK_TOKEN > {}; sleep 30", token_file.string())},
                      nodes, scratch.path());
  const std::string token = token_written_to(token_file);
  BOOST_TEST_REQUIRE(is_token(token));

  const std::string read_locked =
      resource +
      ": writer on 0 of 5 nodes, readers on 5, waiting writer on 0 (quorum 3): "
      "read-locked by 1 reader";
  for (const std::string side : {"--read", "--write"}) {
    BOOST_TEST_CONTEXT("status " << side) {
      const auto status = run({"status", side, resource});
      BOOST_TEST(status.exit_code == 0, status.err);
      const auto lines = lines_of(status.out);
      BOOST_TEST_REQUIRE(lines.size() == 6u, status.out);
      for (std::size_t i = 0; i < 5; ++i) {
        BOOST_TEST(contains(lines[i], "reachable    readers 1: " + token.substr(0, 8) + " "),
                   lines[i]);
      }
      BOOST_TEST(lines[5] == read_locked);
    }
  }
  const auto json = run({"status", "--read", "--json", resource});
  BOOST_TEST(json.exit_code == 0, json.err);
  BOOST_TEST(json_lines(json.out), json.out);
  const auto objects = lines_of(json.out);
  BOOST_TEST_REQUIRE(objects.size() == 6u, json.out);
  BOOST_TEST(contains(objects[0], "\"type\":\"rw_node\""), objects[0]);
  BOOST_TEST(contains(objects[0], "\"readers\":[\"" + token + "\"]"), objects[0]);
  BOOST_TEST(contains(objects[5], "\"type\":\"rw_verdict\""), objects[5]);
  BOOST_TEST(contains(objects[5], "\"state\":\"read_locked\""), objects[5]);
  BOOST_TEST(contains(objects[5], "\"readers\":[\"" + token + "\"]"), objects[5]);

  // The readers' key as a lock's key: held, by a value that is not a lock's, with the way to it.
  const auto key = run({"status", rw_readers_key(resource)});
  BOOST_TEST(key.exit_code == 0, key.err);
  const auto key_lines = lines_of(key.out);
  BOOST_TEST_REQUIRE(key_lines.size() == 7u, key.out);
  BOOST_TEST(key_lines[5] == rw_readers_key(resource) +
                                 ": held on 5 of 5 nodes (quorum 3): not a lock (a value of "
                                 "another type is on a quorum of nodes: no lock can be taken "
                                 "under this name)");
  BOOST_TEST(key_lines[6] == fmt::format("hint: \"{}\" is a key of the read-write lock \"{}\": "
                                         "redlock status --read {} shows its writer, readers and "
                                         "waiting writer",
                                         rw_readers_key(resource), resource, resource));

  // A writer waits for the reader, its mark on every node: new readers are kept out.
  tool_process writer({"run", "--write", "--wait", "60s", resource, "--", "true"}, nodes,
                      scratch.path());
  BOOST_TEST_REQUIRE(
      eventually_blocking([&] { return look.present(rw_mark_key(resource)) == 5; }, 10000ms));
  const auto waiting = run({"status", "--read", resource});
  BOOST_TEST(waiting.exit_code == 0, waiting.err);
  const auto waiting_lines = lines_of(waiting.out);
  BOOST_TEST_REQUIRE(waiting_lines.size() == 6u, waiting.out);
  BOOST_TEST(contains(waiting_lines[0], "; waiting writer "), waiting_lines[0]);
  BOOST_TEST(contains(waiting_lines[5],
                      "waiting writer on 5 (quorum 3): read-locked by 1 reader; "
                      "a writer waits (mark "),
             waiting_lines[5]);
  BOOST_TEST(contains(waiting_lines[5], "on a quorum): new readers are kept out"),
             waiting_lines[5]);

  reader.signal(SIGTERM);  // passed on to COMMAND; the reader's lock is released as it ends
  reader.wait(20s);
  const auto wrote = writer.wait(30s);
  BOOST_TEST(wrote.exit_code == 0, wrote.err);
  BOOST_TEST(eventually_blocking(
      [&] {
        return look.present(rw_readers_key(resource)) + look.present(rw_writer_key(resource)) +
                   look.present(rw_mark_key(resource)) ==
               0;
      },
      5000ms));
  const auto after = run({"status", "--write", resource});
  BOOST_TEST(contains(after.out, resource + ": writer on 0 of 5 nodes, readers on 0, waiting "
                                            "writer on 0 (quorum 3): free\n"),
             after.out);
}

// Readers' deadlines are the node's clock: an entry past it counts for nothing, and status leaves
// it where it is (the lock's scripts remove it; status writes nothing). A reader on two nodes is
// no reader; a mark on three keeps new readers out; a writer on three holds the lock.
BOOST_AUTO_TEST_CASE(status_read_judges_deadlines_on_the_node_clock_and_changes_nothing) {
  const auto readers = rw_readers_key(resource);
  const auto mark = rw_mark_key(resource);
  const auto writer = rw_writer_key(resource);
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    const auto port = fleet()[i].port();
    const auto now = node_time_ms(port);
    sync_client c(port);
    const std::string live = std::to_string(now + 30000);
    c.command({"ZADD", readers, live, "reader-everywhere"});
    if (i < 2) c.command({"ZADD", readers, live, "reader-on-two"});
    if (i == 0) c.command({"ZADD", readers, std::to_string(now - 1000), "reader-past"});
    c.command({"PEXPIRE", readers, "60000"});
    if (i < 3) c.command({"SET", mark, "writer-waiting", "PX", "60000"});
  }
  std::vector<std::string> before;
  for (std::size_t i = 0; i < fleet().size(); ++i)
    before.push_back(dump(fleet()[i].port(), readers) + dump(fleet()[i].port(), mark));

  const auto status = run({"status", "--read", resource});
  BOOST_TEST(status.exit_code == 0, status.err);
  const auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 6u, status.out);
  BOOST_TEST(contains(lines[0], "reachable    readers 2: "), lines[0]);
  BOOST_TEST(contains(lines[0], "; 1 reader past the deadline; waiting writer writer-w ttl "),
             lines[0]);
  BOOST_TEST(contains(lines[4], "reachable    readers 1: reader-e "), lines[4]);
  BOOST_TEST(lines[5] == resource +
                             ": writer on 0 of 5 nodes, readers on 5, waiting writer on 3 "
                             "(quorum 3): read-locked by 1 reader; a writer waits (mark "
                             "writer-w on a quorum): new readers are kept out");
  const auto json = lines_of(run({"status", "--read", "--json", resource}).out);
  BOOST_TEST_REQUIRE(json.size() == 6u);
  BOOST_TEST(contains(json[0], "\"expired_readers\":1"), json[0]);
  BOOST_TEST(contains(json[5],
                      "\"readers\":[\"reader-everywhere\"],\"waiting_writer\":"
                      "\"writer-waiting\""),
             json[5]);
  for (std::size_t i = 0; i < fleet().size(); ++i) {
    BOOST_TEST_CONTEXT("node " << i) {
      BOOST_TEST(dump(fleet()[i].port(), readers) + dump(fleet()[i].port(), mark) == before[i]);
    }
  }

  for (std::size_t i = 0; i < fleet().size(); ++i) {
    sync_client c(fleet()[i].port());
    c.command({"DEL", readers, mark});
    if (i < 3) c.command({"SET", writer, "the-writer", "PX", "60000"});
  }
  const auto written = run({"status", "--write", resource});
  BOOST_TEST(contains(written.out, resource + ": writer on 3 of 5 nodes, readers on 0, waiting "
                                              "writer on 0 (quorum 3): write-locked (token "
                                              "the-writ)\n"),
             written.out);
  for (std::size_t i = 0; i < fleet().size(); ++i)
    sync_client(fleet()[i].port()).command({"DEL", writer});
}

// Several RESOURCEs: each shown as a lock, then the set; a run of a set shows as one token on
// all of its resources.
BOOST_AUTO_TEST_CASE(status_of_several_resources_shows_each_and_the_set) {
  const std::string a = resource + ":a";
  const std::string b = resource + ":b";
  const std::string c = resource + ":c";
  const auto token_file = scratch / "token";
  tool_process holder({"run", a, b, "--", "sh", "-c",
                       fmt::format("echo $REDLOCK_TOKEN > {}; sleep 30", token_file.string())},
                      nodes, scratch.path());
  const std::string token = token_written_to(token_file);
  BOOST_TEST_REQUIRE(is_token(token));

  const auto status = run({"status", a, b, c});
  BOOST_TEST(status.exit_code == 0, status.err);
  const auto lines = lines_of(status.out);
  // Three blocks of five node lines and a verdict, apart by empty lines; then the set.
  BOOST_TEST_REQUIRE(lines.size() == 3u * 7u + 1u, status.out);
  BOOST_TEST(lines[5] == fmt::format("{}: held on 5 of 5 nodes (quorum 3): locked (token {})", a,
                                     token.substr(0, 8)));
  BOOST_TEST(lines[12] == fmt::format("{}: held on 5 of 5 nodes (quorum 3): locked (token {})", b,
                                      token.substr(0, 8)));
  BOOST_TEST(lines[19] == c + ": held on 0 of 5 nodes (quorum 3): free");
  BOOST_TEST(lines[21] == fmt::format("{}, {} and {}: 2 of 3 locked by token {}, 1 free (quorum 3 "
                                      "of 5 nodes)",
                                      a, b, c, token.substr(0, 8)));

  const auto json = run({"status", "--json", a, b});
  BOOST_TEST(json.exit_code == 0, json.err);
  BOOST_TEST(json_lines(json.out), json.out);
  const auto objects = lines_of(json.out);
  BOOST_TEST_REQUIRE(objects.size() == 2u * 6u + 1u, json.out);
  BOOST_TEST(objects.back() ==
             fmt::format("{{\"type\":\"set\",\"resources\":[\"{}\",\"{}\"],\"states\":[\"locked\","
                         "\"locked\"],\"locked\":2,\"free\":0,\"unknown\":0,\"token\":\"{}\","
                         "\"nodes\":5,\"quorum\":3,\"unreachable\":0,\"misconfigured\":0,"
                         "\"quorum_answered\":true}}",
                         a, b, token));

  holder.signal(SIGTERM);
  holder.wait(20s);
  BOOST_TEST(eventually_blocking([&] { return look.present(a) + look.present(b) == 0; }, 5000ms));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(status_of_misconfigured_nodes)

// A member of a Redis Cluster given as redis://: a key of another shard's slot is answered with
// MOVED, which status says is a misconfiguration naming the URL to use (it said "unreachable").
BOOST_AUTO_TEST_CASE(status_names_a_cluster_node_given_as_redis_misconfigured) {
  redlock::test::redis_cluster cluster(3, 0);
  scratch_dir scratch;
  const auto first = cluster.master(0);
  std::string resource = "status-moved";
  for (int i = 0; cluster.master_of_slot(cluster.key_slot(resource)) == first; ++i)
    resource = fmt::format("status-moved-{}", i);
  const auto url = fmt::format("redis://127.0.0.1:{}", cluster.port(first));

  const auto status = run_tool({"status", "--nodes", url, resource}, {}, scratch.path());
  BOOST_TEST(status.exit_code == 1, status.out);
  const auto lines = lines_of(status.out);
  BOOST_TEST_REQUIRE(lines.size() == 3u, status.out);
  BOOST_TEST(contains(lines[0], "misconfigured "), lines[0]);
  BOOST_TEST(contains(lines[0], "redis+cluster://"), lines[0]);
  BOOST_TEST(lines[2] ==
             "misconfigured nodes: 1 (the lock cannot use them until their "
             "configuration is fixed)");
  const auto json = run_tool({"status", "--json", "--nodes", url, resource}, {}, scratch.path());
  BOOST_TEST(contains(json.out, "\"state\":\"misconfigured\""), json.out);
}

// A sentinel given as redis://, a plain server given as redis+sentinel://, and a master name the
// sentinels do not know: each node is misconfigured, with the reason, never "unreachable" and
// never a quoted Lua script.
BOOST_AUTO_TEST_CASE(status_names_sentinel_urls_of_the_wrong_kind_misconfigured) {
  redlock::test::redis_sentinel group;
  scratch_dir scratch;
  std::string unknown_master = group.sentinel_url();
  const auto name_at = unknown_master.find("master=" + group.master_name());
  BOOST_TEST_REQUIRE(name_at != std::string::npos, unknown_master);
  unknown_master.replace(name_at, 7 + group.master_name().size(), "master=nosuch");
  struct url_case {
    std::string what;
    std::string url;
    std::string names;  // what the reason must name
  };
  const std::vector<url_case> cases = {
      {"a sentinel as redis://", fmt::format("redis://127.0.0.1:{}", group.sentinel_port(0)),
       "redis+sentinel://"},
      {"a data node as redis+sentinel://",
       fmt::format("redis+sentinel://127.0.0.1:{}?master={}", group.port(group.master()),
                   group.master_name()),
       "use redis://"},
      {"an unknown master name", unknown_master, "nosuch"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      const auto status = run_tool({"status", "--nodes", c.url, "job"}, {}, scratch.path());
      BOOST_TEST(status.exit_code == 1, status.out);
      const auto lines = lines_of(status.out);
      BOOST_TEST_REQUIRE(lines.size() == 3u, status.out);
      BOOST_TEST(contains(lines[0], "misconfigured "), lines[0]);
      BOOST_TEST(contains(lines[0], c.names), lines[0]);
      BOOST_TEST(!contains(status.out, "redis.call"), status.out);
      BOOST_TEST(lines[2] ==
                 "misconfigured nodes: 1 (the lock cannot use them until their "
                 "configuration is fixed)");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
