// unix:// nodes against real redis-server processes listening on a Unix-domain socket: the lock
// with a password and a database, a node killed and restarted, and a socket the process may not
// open (permission denied, named with the path).

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/acquire_once.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using redlock::test::acquire_once;
using redlock::test::contains;
using redlock::test::default_wait;
using redlock::test::redis_server_options;

redis_server_options on_a_socket(std::string password = {}) {
  redis_server_options options;
  options.unix_socket = true;
  options.password = std::move(password);
  return options;
}

std::vector<redlock::node_config> socket_configs(redis_fleet& fleet) {
  std::vector<redlock::node_config> nodes;
  for (std::size_t i = 0; i < fleet.size(); ++i)
    nodes.push_back(fleet[i].unix_config());
  return nodes;
}

std::string value_on(redis_fleet& fleet, std::size_t i, const std::string& key, int database = 0) {
  sync_client client(fleet[i].port(), fleet[i].config().password);
  if (database != 0) client.command({"SELECT", std::to_string(database)});
  const auto reply = client.command({"GET", key});
  return reply.is_null() ? std::string() : reply.text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(unix_sockets)

// Acquire and release over three sockets, logging in and selecting a database as over TCP; the
// nodes are named by their paths.
BOOST_AUTO_TEST_CASE(acquire_and_release_over_sockets) {
  redis_fleet fleet(3, on_a_socket("s3cret"));
  auto nodes = socket_configs(fleet);
  for (auto& node : nodes)
    node.database = 2;
  BOOST_TEST(nodes[0].address() == "unix:" + fleet[0].unix_path().string());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("local:job", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await redlock::test::eventually(
        [&] {
          for (std::size_t i = 0; i < fleet.size(); ++i)
            if (value_on(fleet, i, "local:job", 2) != lease.token()) return false;
          return true;
        },
        3000ms));
    BOOST_TEST(value_on(fleet, 0, "local:job").empty(), "database 0 is untouched");
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(co_await redlock::test::eventually(
        [&] { return value_on(fleet, 1, "local:job", 2).empty(); }, 2000ms));
  });
}

// A node killed while the client is connected: its socket file is gone, the others carry the
// lock, and once it is back (a new socket at the same path) the client uses it again.
BOOST_AUTO_TEST_CASE(node_killed_and_restarted) {
  redis_fleet fleet(3, on_a_socket());
  const auto nodes = socket_configs(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options();
    options.reconnect = {10ms, 50ms, 2.0};
    redlock::client locks(io.get_executor(), nodes, options);
    auto [ec, lease] =
        co_await locks.async_acquire("local:restart", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    co_await lease.async_release(tuple_awaitable);

    fleet[0].kill9();
    std::tie(ec, lease) =
        co_await locks.async_acquire("local:restart", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);

    // With node 1 down too, a quorum needs node 0 again: the client must be back on its socket.
    fleet[0].start();
    fleet[1].kill9();
    auto waiting = default_wait();
    waiting.wait = 5s;
    std::tie(ec, lease) = co_await locks.async_acquire("local:restart", waiting, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await redlock::test::eventually(
        [&] { return value_on(fleet, 0, "local:restart") == lease.token(); }, 3000ms));
    co_await lease.async_release(tuple_awaitable);
  });
}

// A socket the process may not open: the node fails with the system's "Permission denied" and the
// path. Root may open any socket, so the client runs in a child that gives up root first.
BOOST_AUTO_TEST_CASE(permission_denied_on_the_socket_path) {
  redis_fleet fleet(1, on_a_socket());
  auto node = fleet[0].unix_config();
  ::chmod(fleet[0].unix_path().c_str(), 0700);
  const pid_t child = ::fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(3);
      auto options = default_wait();
      const auto result = acquire_once({node}, options, true);
      // Not a node failure: permissions on a path can change without a client restart.
      if (result.ec != error::no_quorum) code = 4;
      if (!contains(result.diagnostics, "Permission denied")) code = 5;
      if (!contains(result.diagnostics, node.unix_path)) code = 6;
    } catch (...) {
      code = 7;
    }
    std::_Exit(code);
  }
  int status = 0;
  BOOST_TEST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_TEST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0,
             "child exit code " << WEXITSTATUS(status)
                                << " (3 setuid, 4 wrong code, 5 no reason, 6 no path, 7 threw)");
}

// A path where no server listens: "No such file or directory", with the path.
BOOST_AUTO_TEST_CASE(no_socket_at_the_path) {
  redlock::node_config node;
  node.unix_path = "/nonexistent-redlock-test/redis.sock";
  node.host.clear();
  node.port = 0;
  const auto result = acquire_once({node}, default_wait(), true);
  BOOST_TEST(result.ec == error::no_quorum, result.ec.message());
  BOOST_TEST(contains(result.diagnostics, "No such file or directory"), result.diagnostics);
  BOOST_TEST(contains(result.diagnostics, node.unix_path), result.diagnostics);
}

BOOST_AUTO_TEST_SUITE_END()
