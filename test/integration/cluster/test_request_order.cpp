// Requests about one key run in the order they were issued on nodes of several connections, on
// real servers, in the two interleavings that broke it (request_lanes.hpp):
//  (a) a sentinel node: an extension issued while the master's link was down waits for the next
//      master lookup; a longer extension issued once the link is back must not pass it;
//  (b) a cluster node: an extension in flight on the slot's former master meets MOVED after the
//      client learned the slot's new master; a longer extension issued meanwhile must not pass it.
// Either way, the shorter extension running last would leave the key a TTL shorter than the
// validity the lease claims: the check is the key's PTTL once both are answered.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/chaos_proxy.hpp"
#include "support/fake_server.hpp"
#include "support/redis_cluster.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <optional>
#include <string>

namespace {

using redlock::test::redis_cluster;
using redlock::test::renewal;
namespace fake = redlock::test::fake;

// An extension started now whose outcome lands in `done`.
void extend_into(redlock::lease& lease, milliseconds by, std::optional<error_code>& done) {
  lease.async_extend(by, [&done](error_code ec) { done = ec; });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(request_order)

// (a) The master is a real server behind a proxy, named by a scripted sentinel that answers every
// lookup after the first one a second late: long enough for the link to come back meanwhile.
BOOST_AUTO_TEST_CASE(a_request_parked_for_the_master_runs_before_a_later_one_on_a_sentinel_node) {
  redis_fleet fleet(1);
  redlock::test::chaos_proxy proxy(fleet[0].port());
  std::atomic<int> lookups{0};
  const auto proxy_port = std::to_string(proxy.port());
  redlock::test::fake_server sentinel(
      fake::with_handshake([&lookups, proxy_port](const redlock::test::fake_command& command,
                                                  std::size_t) -> redlock::test::fake_reply {
        if (fake::is(command, "HELLO")) return fake::resp3_map();
        if (fake::is(command, "SUBSCRIBE"))
          return ">3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";
        if (fake::is(command, "SENTINEL") && command.size() > 1 &&
            command[1] == "GET-MASTER-ADDR-BY-NAME") {
          const std::string named = "*2\r\n" + fake::bulk("127.0.0.1") + fake::bulk(proxy_port);
          if (++lookups == 1) return named;
          return fake::delayed(named, 1000ms);
        }
        return fake::error("ERR unknown subcommand");
      }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto url =
        "redis+sentinel://127.0.0.1:" + std::to_string(sentinel.port()) + "?master=mymaster";
    redlock::client locks(io.get_executor(), {redlock::node_config::from_url(url)},
                          fast_client_options(3000ms));
    auto [ec, lease] =
        co_await locks.async_acquire("ordered", lock_for(30s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());

    // The link breaks; the lookup it sets off takes a second.
    proxy.down();
    co_await sleep_for(100ms);
    std::optional<error_code> shorter;
    extend_into(lease, 5s, shorter);  // unsent: waits for the lookup
    co_await sleep_for(50ms);
    proxy.up();
    co_await sleep_for(500ms);  // the link is back well before the lookup answers
    BOOST_TEST(!shorter.has_value());
    std::optional<error_code> longer;
    extend_into(lease, 60s, longer);

    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return shorter.has_value() && longer.has_value(); }, 8s));
    BOOST_TEST(!*shorter, shorter->message() << ": " << lease.diagnostics());
    BOOST_TEST(!*longer, longer->message() << ": " << lease.diagnostics());
    BOOST_TEST(lookups >= 2);
    const auto pttl = redlock::test::sync_client(fleet[0].port()).command({"PTTL", "ordered"});
    BOOST_TEST(pttl.integer > 30000, "the key's TTL is " << pttl.integer << " ms");
    co_await lease.async_release(tuple_awaitable);
  });
}

// (b) The lease's slot moves to another shard without the client knowing; its former master is
// stopped (SIGSTOP) while the shorter extension is on its way there, the client learns the new
// master from another slot's MOVED, and the former master answers MOVED once resumed.
BOOST_AUTO_TEST_CASE(a_request_following_its_moved_runs_before_a_later_one_on_a_cluster_node) {
  redlock::test::redis_cluster_options options;
  options.node_timeout = 30s;  // the stopped master is not flagged as failing meanwhile
  redis_cluster cluster(3, 0, options);
  const auto resource_of = [&](std::size_t shard, const std::string& stem) {
    for (int i = 0;; ++i) {
      std::string name = stem + ":" + std::to_string(i);
      if (cluster.shard_of(cluster.master_of_slot(cluster.key_slot(name))) == shard) return name;
    }
  };
  // Shard 2's slots come last: the client's topology refresh asks shard 0's master first.
  const std::string resource = resource_of(2, "ordered");
  const std::string teacher = resource_of(0, "teacher");
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), {redlock::node_config::from_url(cluster.seeds_url())},
                          fast_client_options(5000ms));
    auto [ec, lease] =
        co_await locks.async_acquire(resource, lock_for(30s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());

    const auto former = cluster.master(2);
    cluster.migrate_slot(cluster.key_slot(resource), 1);
    cluster.migrate_slot(cluster.key_slot(teacher), 1);
    const auto target = cluster.master(1);
    BOOST_TEST_REQUIRE(cluster.command(target, {"PTTL", resource}).integer > 0);

    cluster.pause(former);
    std::optional<error_code> shorter;
    extend_into(lease, 5s, shorter);  // to the former master, which will answer MOVED
    co_await sleep_for(50ms);
    // Another slot's MOVED makes the client read the topology again: the lease's slot is on
    // shard 1 now, as far as the client knows.
    auto [taught_ec, taught] = co_await locks.async_acquire(teacher, lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!taught_ec, taught_ec.message() << ": " << taught.diagnostics());
    co_await taught.async_release(tuple_awaitable);
    co_await sleep_for(500ms);
    std::optional<error_code> longer;
    extend_into(lease, 60s, longer);
    co_await sleep_for(300ms);
    cluster.resume(former);

    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return shorter.has_value() && longer.has_value(); }, 10s));
    BOOST_TEST(!*shorter, shorter->message() << ": " << lease.diagnostics());
    BOOST_TEST(!*longer, longer->message() << ": " << lease.diagnostics());
    const auto pttl = cluster.command(target, {"PTTL", resource}).integer;
    BOOST_TEST(pttl > 30000, "the key's TTL is " << pttl << " ms");
    co_await lease.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_SUITE_END()
