// Mistakes in a node's setup reach the caller at once, with a code that says what is wrong and a
// message naming the nodes: a wrong or missing password, a database that does not exist, an ACL
// user without the commands the lock needs, a port where no Redis listens, one server listed
// under two names. Also what the messages of ordinary outcomes say, and how many nodes granted.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/acquire_once.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/fake_server.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using redlock::condition;
using redlock::test::acquire_once;
using redlock::test::check_fails_at_once;
using redlock::test::contains;
using redlock::test::default_wait;
using redlock::test::fake_command;
using redlock::test::fake_server;
using redlock::test::long_wait;
using redlock::test::redis_server;
using redlock::test::redis_server_options;

std::vector<redlock::node_config> with_password(std::vector<redlock::node_config> nodes,
                                                const std::string& password) {
  for (auto& node : nodes)
    node.password = password;
  return nodes;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_errors)

BOOST_AUTO_TEST_CASE(wrong_password_fails_at_once_with_and_without_wait) {
  redis_server_options protected_nodes;
  protected_nodes.password = "s3cret";
  redis_fleet fleet(3, protected_nodes);
  const auto wrong = with_password(fleet.configs(), "wrong");
  for (const auto& options : {default_wait(), long_wait()}) {
    for (const bool try_only : {false, true}) {
      BOOST_TEST_CONTEXT("wait " << (options.wait ? "30 s" : "unset") << ", try " << try_only) {
        const auto result = acquire_once(wrong, options, try_only);
        check_fails_at_once(result, error::auth_failed, fleet.configs()[0].address(),
                            "cannot log in");
        BOOST_TEST(contains(result.diagnostics, "WRONGPASS"), result.diagnostics);
        BOOST_TEST(!contains(result.diagnostics, "wrong"), "the password is never shown");
      }
    }
  }
  // No password where one is required: NOAUTH, the same code.
  auto missing = with_password(fleet.configs(), "");
  const auto result = acquire_once(missing, default_wait());
  check_fails_at_once(result, error::auth_failed, fleet.configs()[1].address(), "cannot log in");
  BOOST_TEST(contains(result.diagnostics, "none is configured"), result.diagnostics);
}

// Permanent errors decide only when they alone leave no quorum: one misconfigured node of three
// still lets the lock work (and says how many granted), two of three end it at once.
BOOST_AUTO_TEST_CASE(permanent_errors_decide_only_when_they_rule_out_a_quorum) {
  redis_server_options protected_nodes;
  protected_nodes.password = "s3cret";
  redis_fleet fleet(3, protected_nodes);
  auto nodes = fleet.configs();
  nodes[2].password = "wrong";
  std::vector<std::string> warnings;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options();
    options.logger = [&](redlock::log_level level, std::string_view message) {
      if (level == redlock::log_level::warning && contains(std::string(message), "acquired on")) {
        warnings.emplace_back(message);
      }
    };
    redlock::client locks(io.get_executor(), nodes, options);
    auto [ec, lease] = co_await locks.async_acquire("orders:1", long_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(lease.granted_nodes() >= 2u);
    for (int i = 0; i < 100 && warnings.empty(); ++i)
      co_await sleep_for(10ms);
    BOOST_TEST(lease.granted_nodes() == 2u);
    BOOST_TEST(contains(lease.diagnostics(), "acquired on 2 of 3 nodes"), lease.diagnostics());
    BOOST_TEST(contains(lease.diagnostics(), nodes[2].address() + " failed ("),
               lease.diagnostics());
    BOOST_TEST_REQUIRE(warnings.size() == 1u);
    co_await lease.async_release(tuple_awaitable);
  });

  nodes[1].password = "wrong";
  const auto result = acquire_once(nodes, long_wait());
  check_fails_at_once(result, error::auth_failed, nodes[1].address(), "cannot log in");
}

BOOST_AUTO_TEST_CASE(missing_database_fails_at_once) {
  redis_fleet fleet(3);
  auto nodes = fleet.configs();
  for (auto& node : nodes)
    node.database = 99;
  const auto result = acquire_once(nodes, default_wait());
  check_fails_at_once(result, error::select_failed, nodes[0].address(),
                      "cannot select database 99");
}

// An ACL user who may not run what the lock needs is refused at connect, naming the command,
// instead of acquiring a lock that it then cannot release.
BOOST_AUTO_TEST_CASE(acl_user_without_script_rights_is_refused_at_connect) {
  redis_server_options options;
  options.acl_users = {
      "noscripts on >pw ~* &* +@all -@scripting",
      "noevalsha on >pw ~* &* +@all -evalsha",
      "nodel on >pw ~* &* +@all -del",
      "locks on >pw ~locks:* &* +@all",
  };
  redis_fleet fleet(3, options);
  auto as = [&](const std::string& user) {
    auto nodes = fleet.configs();
    for (auto& node : nodes) {
      node.username = user;
      node.password = "pw";
    }
    return nodes;
  };
  inspector nodes_now(fleet);
  struct expectation {
    std::string user;
    std::string names;
  };
  for (const auto& [user, names] : std::vector<expectation>{
           {"noscripts", "may not run SCRIPT LOAD"},
           {"noevalsha", "may not run EVALSHA"},
           {"nodel", "may not run DEL"},
       }) {
    BOOST_TEST_CONTEXT(user) {
      const auto result = acquire_once(as(user), default_wait());
      check_fails_at_once(result, error::permission_denied, fleet.configs()[0].address(), names);
      BOOST_TEST(contains(result.diagnostics, "ACL user \"" + user + "\""), result.diagnostics);
      BOOST_TEST(nodes_now.total_keys() == 0);
    }
  }
  // Key patterns depend on the resource: the probe's key is outside them, yet the user may lock
  // what they allow, and a SET refused for the key is a permission error too.
  auto allowed = acquire_once(as("locks"), default_wait(), false, "locks:a");
  BOOST_TEST(!allowed.ec, allowed.ec.message() << ": " << allowed.diagnostics);
  const auto refused = acquire_once(as("locks"), long_wait(), false, "elsewhere");
  BOOST_TEST(refused.ec == error::permission_denied, refused.ec.message());
  BOOST_TEST(refused.took_ms < 5000);
  BOOST_TEST(contains(refused.diagnostics, "NOPERM"), refused.diagnostics);
  // The server names neither the user nor the key: the diagnostics do.
  BOOST_TEST(contains(refused.diagnostics, "ACL user \"locks\""), refused.diagnostics);
  BOOST_TEST(contains(refused.diagnostics, "\"elsewhere\""), refused.diagnostics);
  BOOST_TEST(nodes_now.total_keys() == 0);
  // The fencing counter sits beside the key, outside a pattern that allows only the key.
  auto fenced = long_wait();
  fenced.fencing = true;
  const auto counter_refused = acquire_once(as("locks"), fenced, false, "locks:b");
  BOOST_TEST(counter_refused.ec == error::permission_denied, counter_refused.ec.message());
  BOOST_TEST(contains(counter_refused.diagnostics, "ACL user \"locks\""),
             counter_refused.diagnostics);
  BOOST_TEST(contains(counter_refused.diagnostics, "\"{locks:b}:fence\""),
             counter_refused.diagnostics);
  BOOST_TEST(nodes_now.total_keys() == 0);
}

// A port where something else listens: the message says the server does not speak RESP.
BOOST_AUTO_TEST_CASE(a_port_that_is_not_redis_is_named_as_such) {
  using namespace redlock::test;
  fake_server http([](const fake_command&, std::size_t) {
    return fake::then_close("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  });
  redis_fleet fleet(2);
  auto nodes = fleet.configs();
  nodes.push_back(http.config());
  const auto one_bad = acquire_once(nodes, default_wait());
  BOOST_TEST(!one_bad.ec, one_bad.ec.message());  // two of three are fine
  // Two nodes need both: the one that is not Redis ends the acquire at once.
  nodes.erase(nodes.begin());
  const auto result = acquire_once(nodes, default_wait());
  check_fails_at_once(
      result, error::protocol_error, http.config().address(),
      "the server at " + http.config().address() + " does not speak RESP (an HTTP server?)");
}

// Every request's deadline holds, whatever the connection is doing. A node that accepts TCP and
// never answers the handshake: a PING fails at node_timeout, as the SET of an acquire beside it
// does, long before the connect itself gives up at connect_timeout.
BOOST_AUTO_TEST_CASE(a_ping_behind_a_handshake_that_never_ends_fails_at_node_timeout) {
  using namespace redlock::test;
  fake_server silent([](const fake_command&, std::size_t) { return fake::no_reply(); });
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options(100ms);
    options.connect_timeout = 1s;
    redlock::client locks(io.get_executor(), {silent.config()}, options);
    const auto start = steady_clock::now();
    std::optional<error_code> acquired;
    long long acquire_took = 0;
    locks.async_try_acquire("orders:6", default_wait(), [&](error_code ec, redlock::lease) {
      acquired = ec;
      acquire_took = ms_since(start);
    });
    auto [ec] = co_await locks.async_ping(tuple_awaitable);
    const auto ping_took = ms_since(start);
    BOOST_TEST(ec == error::no_quorum, ec.message());
    BOOST_TEST(ping_took < 600, "the ping took " << ping_took << " ms");
    BOOST_TEST(co_await eventually([&] { return acquired.has_value(); }, 5000ms));
    BOOST_TEST((acquired && *acquired == error::no_quorum));
    BOOST_TEST(acquire_took < 600, "the acquire took " << acquire_took << " ms");
  });
  BOOST_TEST(silent.connections_accepted() >= 1u);
}

// The permission probes ask only about permissions: a node that refuses a write for now (OOM at
// maxmemory, READONLY) still connects, so that releases can reach it; its SETs fail as votes.
BOOST_AUTO_TEST_CASE(probes_refused_for_other_reasons_do_not_fail_the_connect) {
  using namespace redlock::test;
  std::atomic<int> releases{0};
  fake_server full([&releases](const fake_command& command, std::size_t) -> fake_reply {
    if (fake::is_permission_probe(command)) {
      return fake::is(command, "SET") ? fake::oom() : fake::integer(0);
    }
    if (auto handshake = fake::handshake_reply(command)) return *handshake;
    if (fake::is(command, "SET")) return fake::oom();
    if (fake::is(command, "EVALSHA")) {
      ++releases;
      return fake::integer(1);
    }
    return fake::error("ERR unexpected command");
  });
  redis_fleet fleet(2);
  auto nodes = fleet.configs();
  nodes.push_back(full.config());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("orders:5", long_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    for (int i = 0; i < 100 && lease.diagnostics().empty(); ++i)
      co_await sleep_for(5ms);
    BOOST_TEST(contains(lease.diagnostics(), full.config().address() + " failed (unexpected reply"),
               lease.diagnostics());
    BOOST_TEST(contains(lease.diagnostics(), "OOM"), lease.diagnostics());
    auto [released] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    // The release went to the full node too: it was connected all along.
    for (int i = 0; i < 100 && releases.load() == 0; ++i)
      co_await sleep_for(5ms);
    BOOST_TEST(releases.load() == 1);
  });
}

// localhost:P and 127.0.0.1:P are one server: counting it twice would let one server make a
// quorum of two. Found once the names are resolved, at connect, and refused.
BOOST_AUTO_TEST_CASE(one_server_under_two_names_is_refused) {
  redis_fleet fleet(2);
  auto alias = fleet.configs()[0];
  alias.host = "localhost";
  const std::vector<std::vector<redlock::node_config>> lists = {
      {fleet.configs()[0], alias},
      {fleet.configs()[0], alias, fleet.configs()[1]},
  };
  inspector nodes_now(fleet);
  // Two nodes, a quorum of two: the alias must answer, so its refusal decides the first round.
  for (const bool try_only : {false, true}) {
    const auto result = acquire_once(lists[0], long_wait(), try_only);
    BOOST_TEST(result.ec == error::invalid_argument, result.ec.message());
    BOOST_TEST(result.took_ms < 5000);
    BOOST_TEST(contains(result.diagnostics, "localhost:" + std::to_string(alias.port)),
               result.diagnostics);
    BOOST_TEST(contains(result.diagnostics, fleet.configs()[0].address()), result.diagnostics);
    BOOST_TEST(contains(result.diagnostics, "one server"), result.diagnostics);
  }
  // Three nodes: a first round may win on the two distinct servers before the alias has connected
  // (it never counts twice: only one name of a server is ever let in). Once it has, every acquire
  // is refused.
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), lists[1], fast_client_options());
    co_await locks.async_ping(tuple_awaitable);
    co_await sleep_for(300ms);
    for (const bool try_only : {false, true}) {
      std::tuple<error_code, redlock::lease> done;
      if (try_only) {
        done = co_await locks.async_try_acquire("orders:9", long_wait(), tuple_awaitable);
      } else {
        done = co_await locks.async_acquire("orders:9", long_wait(), tuple_awaitable);
      }
      auto& [ec, lease] = done;
      BOOST_TEST(ec == error::invalid_argument, ec.message());
      BOOST_TEST(contains(lease.diagnostics(), "one server"), lease.diagnostics());
    }
  });
  BOOST_TEST(nodes_now.total_keys() == 0);
}

// The exception of a throwing token names the resource and carries each node's answer.
BOOST_AUTO_TEST_CASE(exceptions_carry_the_diagnostics) {
  // A port nobody listens on: bound, then closed.
  std::uint16_t dead_port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor probe(io, {asio::ip::address_v4::loopback(), 0});
    dead_port = probe.local_endpoint().port();
  }
  redlock::node_config dead;
  dead.host = "127.0.0.1";
  dead.port = dead_port;
  redlock::lock_options options;
  options.wait = 300ms;
  auto expect_named = [&](const std::string& what) {
    BOOST_TEST(contains(what, "\"invoice:7\""), what);
    BOOST_TEST(contains(what, dead.address()), what);
    BOOST_TEST(contains(what, "connect failed"), what);
    BOOST_TEST(contains(what, "gave up waiting"), what);
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), {dead}, fast_client_options());
    try {
      co_await redlock::with_lock(locks, "invoice:7", options,
                                  [](redlock::lease&) -> asio::awaitable<void> { co_return; });
      BOOST_FAIL("with_lock did not throw");
    } catch (const boost::system::system_error& e) {
      BOOST_TEST(e.code() == error::wait_timeout);
      expect_named(e.what());
    }
    try {
      co_await locks.async_acquire("invoice:7", options, asio::use_awaitable);
      BOOST_FAIL("async_acquire did not throw");
    } catch (const boost::system::system_error& e) {
      BOOST_TEST(e.code() == error::wait_timeout);
      expect_named(e.what());
    }
    redlock::mutex invoice(locks, "invoice:7", options);
    try {
      co_await invoice.async_lock(asio::use_awaitable);
      BOOST_FAIL("mutex::async_lock did not throw");
    } catch (const boost::system::system_error& e) {
      BOOST_TEST(e.code() == error::wait_timeout);
      expect_named(e.what());
    }
    // Other tokens still get the code.
    auto [ec] = co_await invoice.async_lock(tuple_awaitable);
    BOOST_TEST(ec == error::wait_timeout);
  });
  // use_future throws from get(), on another thread.
  asio::io_context io;
  std::optional<redlock::client> locks(std::in_place, io.get_executor(),
                                       std::vector<redlock::node_config>{dead},
                                       fast_client_options());
  auto future = locks->async_acquire("invoice:7", options, asio::use_future);
  std::thread runner([&] { io.run_for(5s); });
  try {
    future.get();
    BOOST_FAIL("the future did not throw");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST(e.code() == error::wait_timeout);
    expect_named(e.what());
  }
  asio::post(io, [&] { locks.reset(); });
  runner.join();
}

// Diagnostics say what happened: nodes the decision did not wait for are "not awaited", a timeout
// before the request was written does not claim "no reply", a huge resource name is cut short.
BOOST_AUTO_TEST_CASE(messages_are_precise_and_bounded) {
  redis_fleet fleet(3);
  inspector nodes_now(fleet);
  nodes_now.set(0, "report", "someone-else", 30000ms);
  nodes_now.set(1, "report", "someone-else", 30000ms);
  fleet[2].pause();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(2000ms));
    auto [ec, lease] = co_await locks.async_try_acquire("report", {}, tuple_awaitable);
    BOOST_TEST(ec == error::contended);
    const auto& text = lease.diagnostics();
    BOOST_TEST(contains(text, fleet.configs()[2].address() + " not awaited"), text);
    BOOST_TEST(!contains(text, "no answer yet"), text);
  });
  fleet[2].resume();

  // One node down: the round fails, and the diagnostics of a 1 MB name stay small.
  const std::string huge(1 << 20, 'x');
  auto nodes = fleet.configs();
  fleet[1].kill9();
  fleet[2].kill9();
  const auto result = acquire_once(nodes, {}, true, huge);
  BOOST_TEST(result.ec == error::no_quorum, result.ec.message());
  BOOST_TEST(result.diagnostics.size() < 2000u);
  BOOST_TEST(contains(result.diagnostics, "(1048576 bytes)"), result.diagnostics);
}

// After a success the lease counts every node that granted it, late grants included.
BOOST_AUTO_TEST_CASE(granted_nodes_counts_every_grant) {
  redis_fleet fleet(5);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("all-five", {}, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST(lease.granted_nodes() >= 3u);
    for (int i = 0; i < 200 && lease.granted_nodes() < 5u; ++i)
      co_await sleep_for(5ms);
    BOOST_TEST(lease.granted_nodes() == 5u);
    BOOST_TEST(lease.diagnostics().empty(), lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);

    fleet[3].kill9();
    fleet[4].kill9();
    std::tie(ec, lease) = co_await locks.async_acquire("three-of-five", {}, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    for (int i = 0; i < 200 && lease.diagnostics().empty(); ++i)
      co_await sleep_for(5ms);
    BOOST_TEST(lease.granted_nodes() == 3u);
    BOOST_TEST(contains(lease.diagnostics(), "acquired on 3 of 5 nodes"), lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_SUITE_END()
