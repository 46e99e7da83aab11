// A lease held across a requested failover renews on the new master as soon as the client knows
// of the switch, on real servers: a Sentinel group's SENTINEL FAILOVER (known by +switch-master)
// and a Redis Cluster shard's CLUSTER FAILOVER (known by the MOVED the old master answers). The
// key came over to the new master with the TTL it had; without a renewal at the switch it would
// run down there until the next half-life renewal, one that may have gone to the old master.
//
// The TTL is long (60 s: the half-life renewal is 30 s away), so that only a renewal at the
// switch moves the key's expiry within the bound, and a busy machine does not decide the verdict.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/background_thread.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_sentinel.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using redlock::test::redis_cluster;
using redlock::test::redis_sentinel;

constexpr auto ttl = 60s;
constexpr auto node_timeout = 500ms;

// When the key expires on a node, by the test's clock: now + its PTTL (none: no such key).
template <class Fixture>
std::optional<steady_clock::time_point> expiry_on(const Fixture& servers, std::size_t node,
                                                  const std::string& key) {
  const auto pttl = servers.command(node, {"PTTL", key});
  if (pttl.kind != redlock::resp::type::integer || pttl.integer < 0) return std::nullopt;
  return steady_clock::now() + milliseconds(pttl.integer);
}

// Within one node_timeout (and a margin for a busy machine) of `known`, the key's expiry on `node`
// moves more than a second past `before`: the lease renewed there. `before` is at least a second
// and a half old, so a renewal after the switch passes it by that much.
template <class Fixture>
asio::awaitable<bool> renewed_after(const Fixture& servers, std::size_t node,
                                    const std::string& key, steady_clock::time_point before,
                                    steady_clock::time_point known) {
  const auto bound = known + node_timeout + 2s;
  const auto left = std::max<steady_clock::duration>(bound - steady_clock::now(), 100ms);
  co_return co_await eventually(
      [&] {
        const auto expiry = expiry_on(servers, node, key);
        return expiry && *expiry > before + 1s;
      },
      std::chrono::duration_cast<milliseconds>(left), 50ms);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(failover_renewal)

BOOST_AUTO_TEST_CASE(a_sentinel_failover_renews_the_lease_on_the_new_master_at_once) {
  redis_sentinel group;
  std::atomic<steady_clock::rep> moved_at{0};
  auto options = fast_client_options(node_timeout);
  options.logger = [&moved_at](redlock::log_level, std::string_view message) {
    if (message.find("(it moved)") != std::string_view::npos && moved_at == 0)
      moved_at = steady_clock::now().time_since_epoch().count();
    BOOST_TEST_MESSAGE(steady_clock::now().time_since_epoch().count() / 1000000 << " " << message);
  };
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(),
                              {redlock::node_config::from_url(group.sentinel_url())}, options);
        auto [ec, lease] = co_await locks.async_acquire("renewed", lock_for(ttl), tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
        const auto old_master = group.master();
        // On the replica before the failover, so that the new master has it.
        const std::string token = lease.token();
        BOOST_TEST_REQUIRE(co_await eventually(
            [&] {
              return group.command(group.replicas().front(), {"GET", "renewed"}).text == token;
            },
            5s, 50ms));
        co_await sleep_for(1500ms);
        const auto before = expiry_on(group, old_master, "renewed");
        BOOST_TEST_REQUIRE(before.has_value());

        // The key's TTL on the data nodes all along: the master's is the larger one (a replica
        // lags it), and never half the TTL or less.
        std::int64_t lowest = std::numeric_limits<std::int64_t>::max();
        std::size_t new_master = old_master;
        redlock::test::background_thread nemesis([&] { new_master = group.failover(); });
        while (!nemesis.finished()) {
          std::optional<std::int64_t> highest;
          for (std::size_t node = 0; node < group.size(); ++node) {
            // A node whose role is changing drops its connections: this look goes without it.
            try {
              const auto pttl = group.command(node, {"PTTL", "renewed"}).integer;
              highest = std::max(highest.value_or(pttl), pttl);
            } catch (const std::runtime_error&) {
            }
          }
          if (highest) lowest = std::min(lowest, *highest);
          co_await sleep_for(50ms);
        }
        nemesis.join();
        BOOST_TEST_REQUIRE(new_master != old_master);
        BOOST_TEST(lowest > milliseconds(ttl).count() / 2, "lowest TTL seen " << lowest);

        BOOST_TEST_REQUIRE(co_await eventually([&] { return moved_at != 0; }, 5s));
        const steady_clock::time_point known{steady_clock::duration(moved_at.load())};
        BOOST_TEST(co_await renewed_after(group, new_master, "renewed", *before, known),
                   "expiry on the new master moved by "
                       << std::chrono::duration_cast<milliseconds>(
                              expiry_on(group, new_master, "renewed").value_or(*before) - *before)
                              .count()
                       << " ms: " << lease.diagnostics());
        BOOST_TEST(lease.held(), lease.diagnostics());
        auto [release_ec] = co_await lease.async_release(tuple_awaitable);
        BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());
      },
      90s);
}

BOOST_AUTO_TEST_CASE(a_cluster_failover_renews_the_lease_on_the_new_master_once_known) {
  redis_cluster cluster;
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(),
                              {redlock::node_config::from_url(cluster.seeds_url())},
                              fast_client_options(node_timeout));
        // A hash tag of shard 2's: the lease's key and the probe share its slot.
        std::string tag;
        for (int i = 0; tag.empty(); ++i) {
          const std::string name = "renewed:" + std::to_string(i);
          if (cluster.shard_of(cluster.master_of_slot(cluster.key_slot(name))) == 2) tag = name;
        }
        const std::string key = "{" + tag + "}";
        auto [ec, lease] = co_await locks.async_acquire(key, lock_for(ttl), tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
        const auto old_master = cluster.master(2);
        BOOST_TEST_REQUIRE(co_await eventually(
            [&] {
              const auto copies = cluster.keys_on(cluster.replicas(2).front());
              return std::find(copies.begin(), copies.end(), key) != copies.end();
            },
            5s, 50ms));
        co_await sleep_for(1500ms);
        const auto before = expiry_on(cluster, old_master, key);
        BOOST_TEST_REQUIRE(before.has_value());

        cluster.failover(2);
        const auto new_master = cluster.master(2);
        BOOST_TEST_REQUIRE(new_master != old_master);
        // The client learns of it from the next request of the slot: the old master, a replica
        // now, answers MOVED.
        auto [probe_ec, probe] =
            co_await locks.async_acquire(key + ":probe", lock_for(5s), tuple_awaitable);
        BOOST_TEST_REQUIRE(!probe_ec, probe_ec.message() << ": " << probe.diagnostics());
        const auto known = steady_clock::now();
        co_await probe.async_release(tuple_awaitable);
        BOOST_TEST(co_await renewed_after(cluster, new_master, key, *before, known),
                   "expiry on the new master moved by "
                       << std::chrono::duration_cast<milliseconds>(
                              expiry_on(cluster, new_master, key).value_or(*before) - *before)
                              .count()
                       << " ms: " << lease.diagnostics());
        const auto left =
            expiry_on(cluster, new_master, key).value_or(*before) - steady_clock::now();
        BOOST_TEST((left > ttl / 2));
        auto [release_ec] = co_await lease.async_release(tuple_awaitable);
        BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());
      },
      90s);
}

BOOST_AUTO_TEST_SUITE_END()
