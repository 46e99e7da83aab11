// The redis_sentinel fixture (support/redis_sentinel.hpp) against real redis-server processes: it
// forms a master, a replica and three sentinels that agree on the master and know each other,
// and the replica copies the master's writes; SENTINEL FAILOVER promotes the replica; a stopped
// master is failed over by the sentinels on their own within a stated bound, and comes back as a
// replica; a stopped sentinel leaves the others answering, and failing over, and rejoins with its
// id; passwords on the data nodes and on the sentinels; every process dies with the fixture, also
// when its constructor gives up. Each case logs how long the fixture's steps took.

#include "integration/prelude.hpp"
#include "redlock/node_config.hpp"
#include "resp/value.hpp"
#include "support/redis_sentinel.hpp"

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace resp = redlock::resp;
using redlock::node_config;
using redlock::node_kind;
using redlock::test::redis_sentinel;
using redlock::test::redis_sentinel_options;

std::string address(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

// "ip:port" of the master as sentinel `s` names it now.
std::string named_by(const redis_sentinel& group, std::size_t s) {
  const resp::value reply =
      group.sentinel_command(s, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", group.master_name()});
  if (reply.elements.size() != 2) return "<" + resp::to_debug_string(reply) + ">";
  return reply.elements[0].text + ":" + reply.elements[1].text;
}

// Whether every running sentinel names `node` as the master; false also when one cannot answer.
bool all_name(const redis_sentinel& group, std::size_t node) {
  try {
    for (std::size_t s = 0; s < group.sentinels(); ++s) {
      if (group.sentinel_running(s) && named_by(group, s) != address(group.port(node))) {
        return false;
      }
    }
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

// The value of `field` in each entry of SENTINEL REPLICAS or SENTINELS, in order.
std::vector<std::string> entry_fields(const resp::value& reply, const std::string& field) {
  std::vector<std::string> values;
  for (const resp::value& entry : reply.elements) {
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
      if (entry.elements[i].text == field) values.push_back(entry.elements[i + 1].text);
    }
  }
  return values;
}

// ROLE of `node`: "master", or "slave of 127.0.0.1:PORT".
std::string role_of(const redis_sentinel& group, std::size_t node) {
  const resp::value reply = group.command(node, {"ROLE"});
  if (reply.elements.empty()) return "<" + resp::to_debug_string(reply) + ">";
  const std::string& role = reply.elements[0].text;
  if (role == "slave" && reply.elements.size() >= 3) {
    return "slave of " + reply.elements[1].text + ":" + std::to_string(reply.elements[2].integer);
  }
  return role;
}

std::string slave_of(const redis_sentinel& group, std::size_t node) {
  return "slave of " + address(group.port(node));
}

// Writes `key` on the master and waits until its replica has it: WAIT 1 on the same connection,
// since WAIT counts the replicas that have the writes of the connection it is sent on (on a
// fresh one, every replica counts at once).
void write_and_wait(const redis_sentinel& group, std::size_t master, const std::string& key,
                    const std::string& value) {
  sync_client client(group.port(master), group.options().password);
  BOOST_TEST_REQUIRE(client.command({"SET", key, value}).text == "OK");
  BOOST_TEST_REQUIRE(client.command({"WAIT", "1", "5000"}).integer == 1);
}

// The redis-server processes that are children of this process, by pid (from /proc/PID/stat:
// "pid (comm) state ppid ...").
std::set<pid_t> redis_children() {
  std::set<pid_t> children;
  const pid_t self = ::getpid();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // gone meanwhile
    const auto open = stat.find('(');
    const auto close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 >= stat.size()) {
      continue;
    }
    const std::string comm = stat.substr(open + 1, close - open - 1);
    const pid_t parent = static_cast<pid_t>(std::stol(stat.substr(close + 4)));
    if (parent == self && comm == "redis-server") children.insert(std::stoi(name));
  }
  return children;
}

bool gone(pid_t pid) {
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel)

BOOST_AUTO_TEST_CASE(forms_and_the_replica_copies_the_masters_writes) {
  const auto start = steady_clock::now();
  redis_sentinel group;
  BOOST_TEST_MESSAGE("master + 1 replica + 3 sentinels formed and healthy in " << ms_since(start)
                                                                               << " ms");

  BOOST_TEST_REQUIRE(group.size() == 2u);
  BOOST_TEST_REQUIRE(group.sentinels() == 3u);
  BOOST_TEST(group.master_name() == "mymaster");
  BOOST_TEST(group.master() == 0u);
  BOOST_TEST(group.master_port() == group.port(0));
  BOOST_TEST(group.replicas() == std::vector<std::size_t>{1});
  std::set<std::uint16_t> ports = {group.port(0), group.port(1)};
  std::set<pid_t> pids = {group.pid(0), group.pid(1)};
  for (std::size_t s = 0; s < group.sentinels(); ++s) {
    ports.insert(group.sentinel_port(s));
    pids.insert(group.sentinel_pid(s));
    BOOST_TEST(group.sentinel_pid(s) > 0);
  }
  BOOST_TEST(ports.size() == 5u);
  BOOST_TEST(pids.size() == 5u);

  // Every sentinel names the master, lists the replica, knows the two others, and sees a quorum.
  const std::vector<std::uint16_t> sentinel_ports = group.sentinel_ports();
  BOOST_TEST_REQUIRE(sentinel_ports.size() == 3u);
  for (std::size_t s = 0; s < group.sentinels(); ++s) {
    BOOST_TEST_CONTEXT("sentinel " << s) {
      BOOST_TEST(sentinel_ports[s] == group.sentinel_port(s));
      BOOST_TEST(named_by(group, s) == address(group.port(0)));
      const resp::value replicas = group.sentinel_command(s, {"SENTINEL", "REPLICAS", "mymaster"});
      BOOST_TEST(entry_fields(replicas, "port") ==
                 std::vector<std::string>{std::to_string(group.port(1))});
      const resp::value others = group.sentinel_command(s, {"SENTINEL", "SENTINELS", "mymaster"});
      std::set<std::string> other_ports;
      for (const std::string& port : entry_fields(others, "port")) {
        other_ports.insert(port);
      }
      std::set<std::string> expected;
      for (std::size_t o = 0; o < group.sentinels(); ++o) {
        if (o != s) expected.insert(std::to_string(group.sentinel_port(o)));
      }
      BOOST_TEST(other_ports == expected);
      const resp::value quorum = group.sentinel_command(s, {"SENTINEL", "CKQUORUM", "mymaster"});
      BOOST_TEST(quorum.text.starts_with("OK 3 usable Sentinels"), quorum.text);
    }
  }

  // The replica copies the master's writes, and refuses its own.
  BOOST_TEST(role_of(group, 0) == "master");
  BOOST_TEST(role_of(group, 1) == slave_of(group, 0));
  write_and_wait(group, 0, "formed", "yes");
  BOOST_TEST(group.command(1, {"GET", "formed"}).text == "yes");
  BOOST_TEST(group.command(1, {"SET", "formed", "no"}).text.starts_with("READONLY"));

  // A paused replica answers nothing until resumed.
  group.pause(1);
  BOOST_TEST(!group.live(1));
  BOOST_CHECK_THROW(sync_client(group.port(1), {}, {}, 300ms).command({"PING"}),
                    std::runtime_error);
  group.resume(1);
  BOOST_TEST(group.command(1, {"PING"}).text == "PONG");
  group.wait_until_healthy();

  // The URL names the sentinels (the first given one as the host) and the master's name.
  const std::string url = group.sentinel_url();
  BOOST_TEST(url == "redis+sentinel://" + address(sentinel_ports[0]) + "?master=mymaster&seed=" +
                        address(sentinel_ports[1]) + "&seed=" + address(sentinel_ports[2]));
  const node_config parsed = node_config::from_url(url);
  BOOST_TEST((parsed.kind == node_kind::sentinel));
  BOOST_TEST(parsed.host == "127.0.0.1");
  BOOST_TEST(parsed.port == sentinel_ports[0]);
  BOOST_TEST(parsed.sentinel_master == "mymaster");
  BOOST_TEST(parsed.seeds ==
             (std::vector<std::string>{address(sentinel_ports[1]), address(sentinel_ports[2])}));
  BOOST_TEST(parsed.password.empty());
  BOOST_TEST(parsed.sentinel_password.empty());
  BOOST_TEST(node_config::from_url(group.sentinel_url(1)).seeds ==
             (std::vector<std::string>{address(sentinel_ports[0]), address(sentinel_ports[2])}));
  const node_config standalone = group.config(1);
  BOOST_TEST((standalone.kind == node_kind::standalone));
  BOOST_TEST(standalone.host == "127.0.0.1");
  BOOST_TEST(standalone.port == group.port(1));
}

BOOST_AUTO_TEST_CASE(sentinel_failover_promotes_the_replica_and_the_sentinels_agree) {
  redis_sentinel group;
  write_and_wait(group, 0, "before", "1");

  auto start = steady_clock::now();
  BOOST_TEST_REQUIRE(group.failover() == 1u);
  BOOST_TEST_MESSAGE("SENTINEL FAILOVER done, the old master a replica and the group healthy in "
                     << ms_since(start) << " ms");

  BOOST_TEST(group.master() == 1u);
  BOOST_TEST(group.replicas() == std::vector<std::size_t>{0});
  for (std::size_t s = 0; s < group.sentinels(); ++s) {
    BOOST_TEST(named_by(group, s) == address(group.port(1)), "sentinel " << s);
  }
  BOOST_TEST(role_of(group, 1) == "master");
  BOOST_TEST(role_of(group, 0) == slave_of(group, 1));
  // The promoted replica has what the old master had, takes writes, and the old master copies
  // them now.
  BOOST_TEST(group.command(1, {"GET", "before"}).text == "1");
  write_and_wait(group, 1, "after", "2");
  BOOST_TEST(group.command(0, {"GET", "after"}).text == "2");
  BOOST_TEST(group.command(0, {"SET", "after", "3"}).text.starts_with("READONLY"));

  // And back: a second failover right after the first is not held back by failover-timeout.
  start = steady_clock::now();
  BOOST_TEST(group.failover() == 0u);
  BOOST_TEST_MESSAGE("failed back in " << ms_since(start) << " ms");
  BOOST_TEST(all_name(group, 0));
  BOOST_TEST(role_of(group, 1) == slave_of(group, 0));
  BOOST_TEST(group.command(0, {"GET", "after"}).text == "2");
}

BOOST_AUTO_TEST_CASE(a_stopped_master_is_failed_over_by_the_sentinels) {
  redis_sentinel group;
  const redis_sentinel_options& options = group.options();
  write_and_wait(group, 0, "survives", "yes");

  // down-after-milliseconds (1 s) before a sentinel deems the master down, a second or so for
  // two of them to agree and elect a leader (plus up to 1 s of deliberate desynchronisation),
  // about a second to promote the replica: some 4 s. The bound leaves room for one election that
  // split its votes, tried again after 2 x failover-timeout (6 s), on a busy machine.
  BOOST_TEST_REQUIRE(options.down_after == 1000ms);
  BOOST_TEST_REQUIRE(options.failover_timeout == 3000ms);
  const auto bound = 20s;

  const pid_t old_pid = group.pid(0);
  group.stop(0);
  BOOST_TEST(!group.running(0));
  BOOST_TEST(group.pid(0) == -1);
  BOOST_TEST(gone(old_pid));
  auto start = steady_clock::now();
  BOOST_TEST_REQUIRE(redlock::test::eventually_blocking([&] { return all_name(group, 1); }, bound),
                     "the sentinels did not all name the replica within " << bound.count() << " s");
  BOOST_TEST_MESSAGE("every sentinel named the replica " << ms_since(start)
                                                         << " ms after the master was stopped");
  group.wait_until_healthy();
  BOOST_TEST(group.master() == 1u);
  BOOST_TEST(role_of(group, 1) == "master");
  BOOST_TEST(group.command(1, {"GET", "survives"}).text == "yes");

  // The old master comes back on its port as a master (its configuration says nothing else),
  // empty, until a sentinel makes it a replica of the new one.
  start = steady_clock::now();
  group.restart(0);
  BOOST_TEST_MESSAGE("the old master restarted and turned into a replica in " << ms_since(start)
                                                                              << " ms");
  BOOST_TEST(group.pid(0) != old_pid);
  BOOST_TEST(group.master() == 1u);
  BOOST_TEST(role_of(group, 0) == slave_of(group, 1));
  BOOST_TEST(group.command(0, {"GET", "survives"}).text == "yes");
}

BOOST_AUTO_TEST_CASE(a_stopped_sentinel_leaves_the_others_answering_and_rejoins) {
  redis_sentinel group;
  const std::string id = group.sentinel_command(0, {"SENTINEL", "MYID"}).text;
  BOOST_TEST_REQUIRE(id.size() == 40u);

  const std::uint16_t stopped_port = group.sentinel_port(0);
  group.stop_sentinel(0);
  BOOST_TEST(!group.sentinel_running(0));
  BOOST_TEST(group.sentinel_pid(0) == -1);
  BOOST_CHECK_THROW(sync_client(stopped_port, {}, {}, 1s), std::runtime_error);
  BOOST_CHECK_THROW(group.sentinel_command(0, {"PING"}), std::logic_error);

  // The others answer, and the fixture asks them; two of three are still a majority, which may
  // elect a leader and fail over.
  BOOST_TEST(named_by(group, 1) == address(group.port(0)));
  BOOST_TEST(named_by(group, 2) == address(group.port(0)));
  BOOST_TEST(group.master() == 0u);
  group.wait_until_healthy();
  auto start = steady_clock::now();
  BOOST_TEST(group.failover() == 1u);
  BOOST_TEST_MESSAGE("failover with sentinel 0 stopped done in " << ms_since(start) << " ms");
  BOOST_TEST(named_by(group, 1) == address(group.port(1)));
  BOOST_TEST(named_by(group, 2) == address(group.port(1)));

  // Back on its port with its configuration: the same id, and the new master learnt from the
  // others (its file still names the old one).
  start = steady_clock::now();
  group.restart_sentinel(0);
  BOOST_TEST_MESSAGE("sentinel 0 restarted and caught up in " << ms_since(start) << " ms");
  BOOST_TEST(group.sentinel_port(0) == stopped_port);
  BOOST_TEST(group.sentinel_command(0, {"SENTINEL", "MYID"}).text == id);
  BOOST_TEST(named_by(group, 0) == address(group.port(1)));
  BOOST_TEST(entry_fields(group.sentinel_command(0, {"SENTINEL", "SENTINELS", "mymaster"}), "port")
                 .size() == 2u);
}

BOOST_AUTO_TEST_CASE(forms_and_fails_over_with_passwords_on_the_nodes_and_the_sentinels) {
  redis_sentinel_options options;
  options.password = "data-secret";
  options.sentinel_password = "sentinel-secret";
  auto start = steady_clock::now();
  redis_sentinel group(options);
  BOOST_TEST_MESSAGE("formed with passwords in " << ms_since(start) << " ms");

  // Without the passwords nothing is answered.
  BOOST_TEST(sync_client(group.port(0)).command({"GET", "k"}).text.starts_with("NOAUTH"));
  BOOST_TEST(sync_client(group.sentinel_port(0))
                 .command({"SENTINEL", "MASTERS"})
                 .text.starts_with("NOAUTH"));
  BOOST_CHECK_THROW(sync_client(group.sentinel_port(1), "data-secret"), std::runtime_error);
  BOOST_TEST(group.config(0).password == "data-secret");

  const std::vector<std::uint16_t> ports = group.sentinel_ports();
  const std::string url = group.sentinel_url();
  BOOST_TEST(url == "redis+sentinel://:data-secret@" + address(ports[0]) +
                        "?master=mymaster&seed=" + address(ports[1]) +
                        "&seed=" + address(ports[2]) + "&sentinel_password=sentinel-secret");
  const node_config parsed = node_config::from_url(url);
  BOOST_TEST(parsed.password == "data-secret");
  BOOST_TEST(parsed.sentinel_password == "sentinel-secret");
  BOOST_TEST(parsed.sentinel_master == "mymaster");
  BOOST_TEST(parsed.seeds.size() == 2u);

  // The replica logs in to the master (masterauth).
  write_and_wait(group, 0, "secret", "kept");
  BOOST_TEST(group.command(1, {"GET", "secret"}).text == "kept");

  // An automatic failover needs the sentinels to log in to each other (sentinel-pass) to agree
  // the master is down and elect a leader, and to the nodes (auth-pass) to promote the replica.
  group.stop(0);
  start = steady_clock::now();
  group.wait_until_healthy();
  BOOST_TEST_MESSAGE("failed over with passwords in " << ms_since(start) << " ms");
  BOOST_TEST(group.master() == 1u);
  BOOST_TEST(all_name(group, 1));
  BOOST_TEST(group.command(1, {"GET", "secret"}).text == "kept");
  BOOST_TEST(group.command(1, {"SET", "secret", "new"}).text == "OK");
}

BOOST_AUTO_TEST_CASE(every_process_dies_with_the_fixture_also_when_it_gives_up) {
  const std::set<pid_t> before = redis_children();
  redis_sentinel_options options;
  options.replicas = 2;
  options.sentinels = 1;
  options.quorum = 1;
  std::vector<pid_t> pids;
  {
    redis_sentinel group(options);
    BOOST_TEST_REQUIRE(group.size() == 3u);
    BOOST_TEST(group.replicas() == (std::vector<std::size_t>{1, 2}));
    BOOST_TEST(group.sentinel_url() ==
               "redis+sentinel://" + address(group.sentinel_port(0)) + "?master=mymaster");
    BOOST_TEST(entry_fields(group.sentinel_command(0, {"SENTINEL", "REPLICAS", "mymaster"}), "port")
                   .size() == 2u);
    for (std::size_t n = 0; n < group.size(); ++n) {
      pids.push_back(group.pid(n));
    }
    pids.push_back(group.sentinel_pid(0));
    const std::set<pid_t> during = redis_children();
    for (const pid_t pid : pids) {
      BOOST_TEST(during.contains(pid), "pid " << pid);
    }
  }
  for (const pid_t pid : pids) {
    BOOST_TEST(gone(pid), "pid " << pid);
  }
  BOOST_TEST(redis_children() == before);

  // Too short a bound for the group to form: the constructor throws, naming what it waited for,
  // with the servers' logs, and kills what it had started.
  options.ready_timeout = 1ms;
  BOOST_CHECK_EXCEPTION(redis_sentinel{options}, std::runtime_error,
                        [](const std::runtime_error& e) {
                          const std::string what = e.what();
                          BOOST_TEST_MESSAGE("the constructor gave up: " << what.substr(0, 200));
                          return what.starts_with("redis_sentinel: waited 1 ms for") &&
                                 what.find("--- data node 0 (127.0.0.1:") != std::string::npos;
                        });
  BOOST_TEST(redis_children() == before);

  // Options that cannot work are refused before anything starts.
  options.quorum = 2;
  BOOST_CHECK_THROW(redis_sentinel{options}, std::invalid_argument);
  options.quorum = 1;
  options.master_name = "two words";
  BOOST_CHECK_THROW(redis_sentinel{options}, std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
