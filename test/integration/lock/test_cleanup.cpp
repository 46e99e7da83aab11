// A round's cleanup (the token-checked release of what it may have set) must reach every node
// that may hold the key, also when that node's link breaks: the release is kept for the node and
// sent right after the reconnect, so nobody is locked out for a whole TTL although nobody holds the
// lock. Shown for a failed round, a cancelled acquire and a destroyed client, with the link reset
// after the SET ran on 1 and on 3 of 5 nodes.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/reach.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using redlock::test::chaos_proxy;
using redlock::test::plain_lock;
using redlock::test::proxied_fleet;

// How the acquire whose cleanup meets the broken link ends.
enum class cleanup_ending { round_fails, cancelled, client_destroyed };

const char* name_of(cleanup_ending how) {
  switch (how) {
    case cleanup_ending::round_fails:
      return "the round fails";
    case cleanup_ending::cancelled:
      return "the acquire is cancelled";
    case cleanup_ending::client_destroyed:
      return "the client is destroyed";
  }
  return "?";
}

// Nodes [0, broken) are the ones whose link breaks; with fewer than three of them, a rival holds
// nodes 3 and 4, so that the round cannot win without the broken ones.
void run_scenario(cleanup_ending how, std::size_t broken) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  const std::string key = "cleanup";
  std::vector<std::size_t> rival_nodes;
  if (broken < 3) rival_nodes = {3, 4};
  for (const auto i : rival_nodes)
    servers.set(i, key, "rival", 60s);

  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // A node_timeout far longer than the scenario: only the broken link decides the round.
    auto locks = std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                   fast_client_options(5s));
    BOOST_TEST_REQUIRE(co_await nodes.connect(*locks));
    for (std::size_t i = 0; i < broken; ++i)
      nodes.proxies[i]->set_blackhole(chaos_proxy::direction::downstream);

    asio::cancellation_signal cancel;
    std::optional<error_code> outcome;
    locks->async_try_acquire(
        key, plain_lock(60s),
        asio::bind_cancellation_slot(cancel.slot(),
                                     [&](error_code ec, redlock::lease) { outcome = ec; }));
    // The SETs ran on the broken nodes; their replies are lost.
    std::vector<std::size_t> broken_nodes;
    for (std::size_t i = 0; i < broken; ++i)
      broken_nodes.push_back(i);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return servers.present_on(broken_nodes, key) == broken; }, 2s));
    BOOST_TEST(!outcome.has_value());

    if (how == cleanup_ending::round_fails) {
      for (std::size_t i = 0; i < broken; ++i)
        nodes.proxies[i]->set_reset_peer(true);
      BOOST_TEST_REQUIRE(co_await eventually([&] { return outcome.has_value(); }, 2s));
      BOOST_TEST((*outcome == error::no_quorum || *outcome == error::contended),
                 outcome->message());
    } else {
      // The cleanup is written but dropped on its way to the broken nodes, then their links
      // break with it in flight.
      for (std::size_t i = 0; i < broken; ++i)
        nodes.proxies[i]->set_blackhole(true);
      if (how == cleanup_ending::cancelled) {
        cancel.emit(asio::cancellation_type::terminal);
        BOOST_TEST_REQUIRE(co_await eventually([&] { return outcome.has_value(); }, 1s));
        BOOST_TEST(*outcome == asio::error::operation_aborted, outcome->message());
      } else {
        locks.reset();
        BOOST_TEST_REQUIRE(co_await eventually([&] { return outcome.has_value(); }, 1s));
      }
      co_await redlock::test::sleep_for(50ms);
      for (std::size_t i = 0; i < broken; ++i)
        nodes.proxies[i]->set_reset_peer(true);
    }
    BOOST_TEST(servers.present_on(broken_nodes, key) == broken);  // still there: the link broke
    for (std::size_t i = 0; i < broken; ++i)
      nodes.proxies[i]->clear();

    // The client reconnects within tens of milliseconds and sends the kept releases first.
    const bool clean = co_await eventually(
        [&] {
          return servers.present(key) == rival_nodes.size() &&
                 servers.holding_on(rival_nodes, key, "rival") == rival_nodes.size();
        },
        3s);
    BOOST_TEST(clean, "keys left: " << servers.present(key) - rival_nodes.size()
                                    << ", with TTLs of " << servers.pttl(0, key)
                                    << " ms on node 0");
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cleanup)

BOOST_AUTO_TEST_CASE(releases_survive_a_reset_after_the_set_ran) {
  for (const cleanup_ending how :
       {cleanup_ending::round_fails, cleanup_ending::cancelled, cleanup_ending::client_destroyed}) {
    for (const std::size_t broken : {1, 3}) {
      BOOST_TEST_CONTEXT(name_of(how) << ", " << broken << " of 5 links reset") {
        run_scenario(how, broken);
      }
    }
  }
}

// A lease released while one of its nodes is down (and restarted with its data, as with AOF):
// the release is kept for that node and deletes the key there once it is back, instead of leaving
// it for its TTL.
BOOST_AUTO_TEST_CASE(a_release_reaches_a_node_that_was_down) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes.configs(), fast_client_options());
    auto [ec, lease] = co_await locks.async_try_acquire("down", plain_lock(60s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return servers.present("down") == 5; }, 2s));
    nodes.proxies[0]->down();  // refuses connections: the client's link to node 0 is gone
    co_await redlock::test::sleep_for(100ms);

    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
    // The release completed with a quorum of answers; the last node that is up may answer later.
    BOOST_TEST(co_await eventually(
        [&] {
          return servers.present_on({1, 2, 3, 4}, "down") == 0u;
        },
        2s));
    BOOST_TEST(servers.present_on({0}, "down") == 1u);

    nodes.proxies[0]->up();
    BOOST_TEST(co_await eventually([&] { return servers.present("down") == 0; }, 3s),
               "node 0 still holds the key");
  });
}

// A round never sends its SET to a node that is skipped as unresponsive (or down): it fails at
// once, unsent, so the round's cleanup leaves that node alone. Here node 4 is stopped: the first
// round's SET waits there and times out, so that round's release is queued behind it; the next two
// rounds skip node 4 and send it nothing. Once it runs again it has executed one release, not
// three.
BOOST_FIXTURE_TEST_CASE(no_release_where_the_set_was_never_sent, redlock::test::five_nodes) {
  nodes.set(2, "unsent", "rival", 60s);
  nodes.set(3, "unsent", "rival", 60s);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto ping_ec = co_await redlock::test::ping_until_answered(locks);
    BOOST_TEST_REQUIRE(!ping_ec);
    co_await redlock::test::sleep_for(50ms);  // every node connected
    auto calls = [&](std::string_view command) {
      redlock::test::sync_client node(fleet[4].port());
      const auto info = node.command({"INFO", "commandstats"}).text;
      const std::string field = fmt::format("cmdstat_{}:calls=", command);
      const auto at = info.find(field);
      return at == std::string::npos ? 0 : std::stoi(info.substr(at + field.size()));
    };
    // The handshake's permission probes ran a SET and EVALSHAs already.
    const int sets_before = calls("set");
    const int evalshas_before = calls("evalsha");
    fleet[4].pause();
    for (int round = 0; round < 3; ++round) {
      auto [ec, lease] =
          co_await locks.async_try_acquire("unsent", plain_lock(60s), tuple_awaitable);
      BOOST_TEST(ec == error::contended, ec.message() << ": " << lease.diagnostics());
    }
    fleet[4].resume();
    BOOST_TEST(co_await eventually([&] { return calls("evalsha") >= evalshas_before + 1; }, 2s));
    co_await redlock::test::sleep_for(200ms);
    BOOST_TEST(calls("set") - sets_before == 1);
    BOOST_TEST(calls("evalsha") - evalshas_before == 1);
    BOOST_TEST(nodes.present_on({0, 1, 4}, "unsent") == 0u);
  });
}

BOOST_AUTO_TEST_SUITE_END()
