// Real network partitions: every redis-server runs alone in its own network namespace, joined to
// the client's namespace by a veth pair, and a partition takes the server's end of the pair down.
// Unlike a killed server or a closing proxy, the client then sees only silence: no RST, no FIN,
// connects that never complete. What is claimed is checked on the servers themselves, through
// blocking clients that connect from inside each server's namespace over its loopback, which works
// while the server is cut off from the client.

#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/netns.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;
using redlock::test::eventually;
using redlock::test::ms_between;
using redlock::test::ms_since;
using redlock::test::netns;
using redlock::test::redis_server;
using redlock::test::redis_server_options;
using redlock::test::run_async;
using redlock::test::sleep_for;
using redlock::test::sync_client;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

using redlock::test::tuple_awaitable;
constexpr std::size_t node_count = 5;
constexpr auto node_timeout = 200ms;

const std::vector<std::size_t> all_nodes = {0, 1, 2, 3, 4};

// What the client logged, in order; the logger runs on the client's executor (the test thread).
using log_book = std::shared_ptr<std::vector<std::string>>;

redlock::client_options fast_options(const log_book& log) {
  redlock::client_options options = redlock::test::fast_client_options(node_timeout);
  // A partitioned connection never fails by itself: nothing arrives, not even a reset. Only the
  // health check notices the silence; shortened so that a partition closes the connection (and a
  // heal is followed by a reconnect) within the tests' time.
  options.health_check_timeout = 1000ms;
  options.logger = [log](redlock::log_level, std::string_view message) {
    log->emplace_back(message);
  };
  return options;
}

using redlock::test::lock_for;
using redlock::test::renewal;

std::vector<std::size_t> except(const std::vector<std::size_t>& removed) {
  std::vector<std::size_t> kept;
  for (const auto node : all_nodes) {
    if (std::find(removed.begin(), removed.end(), node) == removed.end()) kept.push_back(node);
  }
  return kept;
}

// Five servers, each alone in a server namespace of one topology. The test thread must run the
// client inside the client namespace (client_side()) for as long as the client may connect.
class partitioned_fleet {
 public:
  partitioned_fleet() : net_(node_count) {
    for (std::size_t i = 0; i < node_count; ++i) {
      redis_server_options options;
      options.network_namespace = net_.server_namespace(i);
      options.bind_address = net_.server_address(i);
      servers_.push_back(std::make_unique<redis_server>(std::move(options)));
    }
  }

  netns& net() { return net_; }

  std::vector<redlock::node_config> configs() const {
    std::vector<redlock::node_config> configs;
    for (const auto& server : servers_) {
      configs.push_back(server->config());
    }
    return configs;
  }

  // "10.200.i.2:port", as the client names the node in its log.
  std::string address(std::size_t i) const { return servers_.at(i)->config().address(); }

  void partition(const std::vector<std::size_t>& nodes) {
    for (const auto node : nodes) {
      net_.partition(node);
    }
  }

  void heal_all() {
    for (std::size_t i = 0; i < node_count; ++i) {
      net_.heal(i);
    }
  }

  // Asked from inside the server's own namespace, over its loopback: partitions do not matter.
  std::optional<std::string> get(std::size_t node, std::string_view key) {
    const netns::guard inside(net_.server_namespace(node));
    sync_client client(servers_.at(node)->port(), {}, {}, 2s);
    const auto reply = client.command({"GET", key});
    if (reply.is_null()) return std::nullopt;
    return reply.text;
  }

  long long pttl(std::size_t node, std::string_view key) {
    const netns::guard inside(net_.server_namespace(node));
    sync_client client(servers_.at(node)->port(), {}, {}, 2s);
    return client.command({"PTTL", key}).integer;
  }

  std::size_t holding(const std::vector<std::size_t>& nodes, std::string_view key,
                      std::string_view value) {
    std::size_t count = 0;
    for (const auto node : nodes) {
      const auto v = get(node, key);
      count += v && *v == value ? 1 : 0;
    }
    return count;
  }

  std::size_t present(const std::vector<std::size_t>& nodes, std::string_view key) {
    std::size_t count = 0;
    for (const auto node : nodes) {
      count += get(node, key) ? 1 : 0;
    }
    return count;
  }

 private:
  netns net_;
  std::vector<std::unique_ptr<redis_server>> servers_;  // declared after net_: stopped first
};

std::size_t count_logged(const log_book& log, const std::string& message) {
  return static_cast<std::size_t>(std::count(log->begin(), log->end(), message));
}

std::size_t connects_logged(const log_book& log, const std::string& address) {
  return count_logged(log, address + ": connected");
}

// A first PING round is decided at quorum, so some connections may still be opening after it.
// Waits until the client has connected to every node, so that a partition cuts live connections.
asio::awaitable<void> connect_all(redlock::client& locks, partitioned_fleet& fleet,
                                  const log_book& log) {
  auto [ec] = co_await locks.async_ping(tuple_awaitable);
  BOOST_TEST_REQUIRE(!ec, "ping: " << ec.message());
  const bool all = co_await eventually(
      [&] {
        return std::all_of(all_nodes.begin(), all_nodes.end(), [&](std::size_t i) {
          return connects_logged(log, fleet.address(i)) > 0;
        });
      },
      5000ms);
  BOOST_TEST_REQUIRE(all, "not connected to every node within 5 s");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(partition)

// With one and then two of five nodes cut off, a quorum still answers: the acquire succeeds in
// about one round, bounded by node_timeout, and does not wait node_timeout per silent node.
BOOST_AUTO_TEST_CASE(acquire_with_a_minority_partitioned) {
  partitioned_fleet fleet;
  const auto log = std::make_shared<std::vector<std::string>>();
  const netns::guard in_client(fleet.net().client_namespace());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_options(log));
    co_await connect_all(locks, fleet, log);

    std::vector<std::size_t> cut;
    for (const std::size_t node : {std::size_t{0}, std::size_t{1}}) {
      fleet.partition({node});
      cut.push_back(node);
      const auto reachable = except(cut);
      const std::string key = fmt::format("minority-{}", cut.size());

      const auto start = steady_clock::now();
      auto [ec, lease] =
          co_await locks.async_acquire(key, lock_for(5000ms, renewal::off), tuple_awaitable);
      const auto took = ms_since(start);
      BOOST_TEST_REQUIRE(!ec, cut.size()
                                  << " cut: " << ec.message() << ": " << lease.diagnostics());
      BOOST_TEST_MESSAGE(cut.size() << " of 5 partitioned: acquired in " << took << " ms");
      BOOST_TEST(took < node_timeout.count() + 500, cut.size() << " cut: took " << took << " ms");
      BOOST_TEST(lease.held());

      const bool settled = co_await eventually(
          [&] { return fleet.holding(reachable, key, lease.token()) == reachable.size(); }, 3000ms);
      BOOST_TEST(settled, cut.size() << " cut: the lock did not reach every reachable node");
      BOOST_TEST(fleet.present(cut, key) == 0u, "a partitioned node got the SET");

      const auto release_start = steady_clock::now();
      auto [release_ec] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST(!release_ec, cut.size() << " cut: release: " << release_ec.message());
      BOOST_TEST(ms_since(release_start) < node_timeout.count() + 500);
      BOOST_TEST(!lease.held());
      BOOST_TEST(co_await eventually([&] { return fleet.present(reachable, key) == 0; }, 2000ms));
    }
  });
}

// With three of five cut off no quorum can answer: a single round fails with no_quorum within about
// one node_timeout, and a waiting acquire gives up at its deadline. The SETs that reached the two
// reachable nodes are taken back; after the heal nothing of ours is left anywhere (a SET still in a
// retransmit queue may arrive late, so expiry is allowed for: the TTL is short).
BOOST_AUTO_TEST_CASE(no_quorum_with_a_majority_partitioned) {
  partitioned_fleet fleet;
  const auto log = std::make_shared<std::vector<std::string>>();
  const netns::guard in_client(fleet.net().client_namespace());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_options(log));
    co_await connect_all(locks, fleet, log);

    const std::vector<std::size_t> cut = {0, 1, 2};
    const auto reachable = except(cut);
    fleet.partition(cut);

    // The TTL is well above the time the clean-up is given, so a key gone by then was deleted,
    // not expired.
    const auto ttl = 3000ms;
    auto start = steady_clock::now();
    auto [ec, lease] =
        co_await locks.async_try_acquire("majority", lock_for(ttl, renewal::off), tuple_awaitable);
    auto took = ms_since(start);
    BOOST_TEST_MESSAGE("3 of 5 partitioned: try_acquire failed in " << took << " ms");
    BOOST_TEST(ec == error::no_quorum, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(took < node_timeout.count() + 500, "took " << took << " ms");
    BOOST_TEST(!lease.held());
    BOOST_TEST(
        co_await eventually([&] { return fleet.present(reachable, "majority") == 0; }, 1000ms),
        "the failed round was not cleaned up on the reachable nodes");
    BOOST_TEST(fleet.present(cut, "majority") == 0u, "a partitioned node got the SET");

    redlock::lock_options waiting = lock_for(ttl, renewal::off);
    waiting.wait = 1000ms;
    start = steady_clock::now();
    std::tie(ec, lease) = co_await locks.async_acquire("majority", waiting, tuple_awaitable);
    took = ms_since(start);
    BOOST_TEST(ec == error::wait_timeout, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(took >= 1000 - 50, "gave up after " << took << " ms");
    BOOST_TEST(took < 1000 + node_timeout.count() + 500, "gave up after " << took << " ms");
    BOOST_TEST(
        co_await eventually([&] { return fleet.present(reachable, "majority") == 0; }, 1000ms));

    fleet.heal_all();
    const auto healed = steady_clock::now();
    const bool clean = co_await eventually(
        [&] { return fleet.present(all_nodes, "majority") == 0; }, 15000ms, 50ms);
    BOOST_TEST(clean, "a key was left behind " << ms_since(healed) << " ms after the heal");
  });
}

// A held, auto-renewed lock survives two of five nodes cut off for several TTLs (renewal needs only
// a quorum), and is reported lost once a third is cut off: renewal cannot reach a quorum, and
// async_wait_lost completes by about the end of the validity it had.
BOOST_AUTO_TEST_CASE(renewal_keeps_the_lock_until_a_majority_is_cut_off) {
  partitioned_fleet fleet;
  const auto log = std::make_shared<std::vector<std::string>>();
  const netns::guard in_client(fleet.net().client_namespace());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_options(log));
    co_await connect_all(locks, fleet, log);

    const auto ttl = 1000ms;
    auto [ec, lease] =
        co_await locks.async_acquire("renewed", lock_for(ttl, renewal::on), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());

    bool lost = false;
    error_code lost_ec;
    steady_clock::time_point lost_at;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          std::tie(lost_ec) = co_await lease.async_wait_lost(tuple_awaitable);
          lost_at = steady_clock::now();
          lost = true;
        },
        asio::detached);

    fleet.partition({3, 4});
    const std::vector<std::size_t> reachable = {0, 1, 2};
    for (int i = 0; i < 7; ++i) {
      co_await sleep_for(ttl / 2);
      BOOST_TEST_REQUIRE(!lost, "lost with two of five partitioned: " << lost_ec.message() << ": "
                                                                      << lease.diagnostics());
      BOOST_TEST_REQUIRE(lease.held());
    }
    // 3.5 TTLs on, so the keys are there only because renewal extended them.
    BOOST_TEST(fleet.holding(reachable, "renewed", lease.token()) == reachable.size());
    for (const auto node : reachable) {
      BOOST_TEST(fleet.pttl(node, "renewed") > 0, "node " << node);
    }

    const auto validity_end = lease.valid_until();
    const auto cut_at = steady_clock::now();
    fleet.partition({2});
    // partition() runs `ip` on this thread, which also runs the client: on a loaded machine it
    // can take seconds, during which no timer of the client can fire. The loss is due at the
    // validity's end, or as soon as the client runs again if that is later.
    const auto cut_done = steady_clock::now();
    const bool signalled = co_await eventually([&] { return lost; }, 5000ms, 5ms);
    BOOST_TEST_REQUIRE(signalled, "loss not signalled 5 s after the third partition");
    BOOST_TEST(lost_ec == error::lock_lost, lost_ec.message());
    const auto due = std::max(validity_end, cut_done);
    BOOST_TEST_MESSAGE("3 of 5 partitioned (the cut took "
                       << ms_between(cut_at, cut_done) << " ms): loss signalled "
                       << ms_between(cut_at, lost_at) << " ms after the cut, "
                       << ms_between(validity_end, lost_at) << " ms after the validity end");
    BOOST_TEST((lost_at >= cut_at));
    BOOST_TEST(ms_between(due, lost_at) < 1000,
               "signalled " << ms_between(due, lost_at)
                            << " ms after the validity end or the cut's end, whichever is later; "
                            << lease.diagnostics());
    BOOST_TEST(!lease.held());

    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(release_ec == error::not_held, release_ec.message());

    fleet.heal_all();
    BOOST_TEST(co_await eventually([&] { return fleet.present(all_nodes, "renewed") == 0; },
                                   15000ms, 50ms));
  });
}

// After a heal the client finds the nodes again by itself: the health check closed the silent
// connections during the partition, reconnecting succeeds once the links are back, and the next
// acquire is granted by all five nodes.
BOOST_AUTO_TEST_CASE(heal_restores_every_vote) {
  partitioned_fleet fleet;
  const auto log = std::make_shared<std::vector<std::string>>();
  const netns::guard in_client(fleet.net().client_namespace());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_options(log));
    co_await connect_all(locks, fleet, log);

    const std::vector<std::size_t> cut = {3, 4};
    fleet.partition(cut);

    // Requests left unanswered on the cut connections: what the health check notices.
    auto [ec, lease] =
        co_await locks.async_acquire("healed", lock_for(5000ms, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());

    const auto noticed = [&](std::size_t node) {
      const std::string prefix = fleet.address(node) + ": ";
      return std::any_of(log->begin(), log->end(), [&](const std::string& line) {
        return line.starts_with(prefix) && line.find("reconnecting") != std::string::npos;
      });
    };
    const bool dropped =
        co_await eventually([&] { return noticed(3) && noticed(4); }, 5000ms, 10ms);
    BOOST_TEST_REQUIRE(dropped, "the silent connections were not closed within 5 s");

    const std::size_t connects_before[] = {connects_logged(log, fleet.address(3)),
                                           connects_logged(log, fleet.address(4))};
    fleet.heal_all();
    const auto healed = steady_clock::now();
    const bool reconnected = co_await eventually(
        [&] {
          return connects_logged(log, fleet.address(3)) > connects_before[0] &&
                 connects_logged(log, fleet.address(4)) > connects_before[1];
        },
        10000ms, 10ms);
    BOOST_TEST_REQUIRE(reconnected, "no reconnect within 10 s of the heal");
    BOOST_TEST_MESSAGE("reconnected " << ms_since(healed) << " ms after the heal");

    // The cut nodes may still receive the old SET and DEL from a retransmit queue; they arrive in
    // that order, so they leave nothing behind.
    BOOST_TEST(co_await eventually([&] { return fleet.present(all_nodes, "healed") == 0; }, 10000ms,
                                   20ms));

    auto [again_ec, again] =
        co_await locks.async_acquire("healed", lock_for(5000ms, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!again_ec, again_ec.message() << ": " << again.diagnostics());
    const bool everywhere = co_await eventually(
        [&] { return fleet.holding(all_nodes, "healed", again.token()) == node_count; }, 3000ms);
    BOOST_TEST(everywhere, "granted by " << fleet.holding(all_nodes, "healed", again.token())
                                         << " of 5 nodes after the heal");
    for (const auto node : all_nodes) {
      const auto pttl = fleet.pttl(node, "healed");
      BOOST_TEST(pttl > 0, "node " << node);
      BOOST_TEST(pttl <= 5000, "node " << node);
    }
    std::tie(release_ec) = co_await again.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(
        co_await eventually([&] { return fleet.present(all_nodes, "healed") == 0; }, 2000ms));
  });
}

BOOST_AUTO_TEST_SUITE_END()
