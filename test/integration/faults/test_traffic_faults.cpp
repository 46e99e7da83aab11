// Traffic that arrives late or is cut: a renewal racing its expiry, connections broken in the
// middle of a pipeline, a SET applied after its round gave up. Late replies are dropped, never
// paired with a later command, and what a late command did is undone.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/exclusion_verdict.hpp"
#include "support/extension_counter.hpp"
#include "support/five_nodes.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/lock_recorder.hpp"
#include "support/lock_workload.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <unistd.h>
#include <vector>

namespace {

using redlock::test::mono_now;
using redlock::test::op_kind;
using redlock::test::op_result;

using recorder = redlock::test::lock_recorder;
using redlock::test::plain_lock;
using redlock::test::proxied_fleet;

}  // namespace

BOOST_AUTO_TEST_SUITE(traffic_faults)

// Scenario 7: the renewal is delayed past the expiry (every node behind a 250 ms one-way delay,
// TTL 300 ms) and a rival takes the lock meanwhile. The late token-checked PEXPIRE finds the
// rival's key and changes nothing; the loss is signalled exactly once; no overlap.
BOOST_FIXTURE_TEST_CASE(renewal_racing_expiry, redlock::test::five_nodes) {
  redlock::test::history log;
  std::vector<std::unique_ptr<redlock::test::chaos_proxy>> proxies;
  std::vector<redlock::node_config> through_proxies;
  for (std::size_t i = 0; i < 5; ++i) {
    proxies.push_back(std::make_unique<redlock::test::chaos_proxy>(fleet[i].port()));
    through_proxies.push_back(proxies.back()->config());
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client a_locks(io.get_executor(), through_proxies, fast_client_options());
    redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
    recorder a(log, "a", "r");
    recorder b(log, "b", "r");
    redlock::lock_options renewed = plain_lock(300ms);
    renewed.auto_renew = true;

    auto a_lease = co_await a.try_acquire(a_locks, renewed);
    BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
    int losses = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [ec] = co_await a_lease.async_wait_lost(tuple_awaitable);
          if (ec == error::lock_lost) {
            ++losses;
            log.record({"a", "r", a_lease.token(), op_kind::lost, op_result::ok, mono_now(),
                        mono_now(), 0, 0});
          }
        },
        asio::detached);
    for (auto& proxy : proxies)
      proxy->set_latency(250ms);

    // The key expires on the servers at about 300 ms; the rival waits for that.
    const bool expired = co_await eventually([&] { return nodes.present("r") == 0; }, 2s);
    BOOST_TEST_REQUIRE(expired);
    auto b_lease = co_await b.try_acquire(b_locks, plain_lock(5s));
    BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());

    // Let every delayed PEXPIRE arrive and be answered.
    co_await sleep_for(1200ms);
    BOOST_TEST(losses == 1);
    BOOST_TEST(!a_lease.held());
    BOOST_TEST(nodes.holding("r", b_lease.token()) == 5u);  // never overwritten nor re-created
    for (std::size_t i = 0; i < 5; ++i)
      BOOST_TEST(nodes.pttl(i, "r") <= 5000, "node " << i);
    for (auto& proxy : proxies)
      proxy->set_latency(0ms);
    BOOST_TEST(!co_await b.release(b_lease));
  });
  const auto result = redlock::test::judge_exclusion(log);
  BOOST_TEST(result.ok(), result.describe());
}

// Every node answers later than node_timeout (100 ms each way against a 50 ms deadline), as a
// loaded server or machine does, for several TTLs. Each renewal waits for the answers while its
// lease is valid, so the lease is renewed, never lost; a renewal that gave up at node_timeout
// would fail and be retried into the same delay until the lease ran out. A user's extension
// still gives up at node_timeout.
BOOST_AUTO_TEST_CASE(renewal_outlasts_answers_slower_than_node_timeout) {
  proxied_fleet net;
  inspector nodes{net.fleet};
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto outcomes = std::make_shared<redlock::test::extension_counter>();
    auto options = fast_client_options(50ms);
    options.observer = outcomes;
    redlock::client locks(io.get_executor(), net.configs(), options);
    co_await redlock::test::warm_up(locks);  // no connect within the acquire's 50 ms deadline
    const auto ttl = 1500ms;
    auto [ec, lease] = co_await locks.async_acquire("slow", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    for (auto& proxy : net.proxies)
      proxy->set_latency(100ms);

    bool always_held = true;
    const auto until = steady_clock::now() + 3 * ttl;
    while (steady_clock::now() < until) {
      always_held = always_held && lease.held();
      co_await sleep_for(20ms);
    }
    BOOST_TEST(always_held);
    BOOST_TEST(outcomes->lost == 0u);
    BOOST_TEST(outcomes->failed == 0u);
    // Renewal at half-life for three TTLs: about five; ask for three.
    BOOST_TEST(outcomes->confirmed >= 3u);
    // A node whose grant came after the deadline holds no key to renew; a quorum does.
    BOOST_TEST(nodes.holding("slow", lease.token()) >= 3u);

    const auto asked = steady_clock::now();
    auto [extend_ec] = co_await lease.async_extend(ttl, tuple_awaitable);
    BOOST_TEST(extend_ec == error::no_quorum, extend_ec.message());
    BOOST_TEST(ms_since(asked) < 1000);
    BOOST_TEST(lease.held());

    for (auto& proxy : net.proxies)
      proxy->set_latency(0ms);
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(co_await eventually([&] { return nodes.present("slow") == 0; }, 2s));
  });
}

// Scenario 4: connections broken in the middle of a pipeline on one node while 200 acquires are
// in flight: reset by the proxy (reset_peer), closed after a few kilobytes (limit_data), or killed
// by the server itself (CLIENT KILL). Every operation completes exactly once, the other four nodes
// carry every acquire, and the node's connection comes back.
BOOST_AUTO_TEST_CASE(connection_reset_mid_pipeline) {
  enum class breaker { reset_peer, limit_data, client_kill };
  for (const auto kind : redlock::test::every_link) {
    BOOST_TEST_CONTEXT(redlock::test::name_of(kind)) {
      proxied_fleet nodes(5, kind);
      inspector servers(nodes.fleet);
      for (const breaker how : {breaker::reset_peer, breaker::limit_data, breaker::client_kill}) {
        const int variant = static_cast<int>(how);
        BOOST_TEST_CONTEXT((std::array{"reset_peer", "limit_data", "client_kill"}[variant])) {
          run_async([&](asio::io_context& io) -> asio::awaitable<void> {
            redlock::client locks(io.get_executor(), nodes.configs(), fast_client_options(300ms));
            BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
            // Keys whose release could not reach the broken node expire there with this TTL.
            auto short_lock = plain_lock(1s);
            short_lock.auto_renew = true;
            const auto accepted_before = nodes.proxies[2]->connections_accepted();
            if (how == breaker::limit_data)
              nodes.proxies[2]->set_limit_data(redlock::test::chaos_proxy::direction::upstream,
                                               3000);
            constexpr std::size_t count = 200;
            std::vector<int> completions(count, 0);
            std::vector<redlock::lease> leases(count);
            std::size_t granted = 0;
            co_await redlock::test::run_all(count, [&](std::size_t i) -> asio::awaitable<void> {
              if (i == count / 2) {
                if (how == breaker::reset_peer) nodes.proxies[2]->set_reset_peer(true);
                if (how == breaker::client_kill) {
                  sync_client admin(nodes.fleet[2].port());
                  const auto killed = admin.command({"CLIENT", "KILL", "TYPE", "normal"});
                  BOOST_TEST(killed.integer >= 1, "CLIENT KILL closed no connection");
                }
              }
              auto [ec, lease] = co_await locks.async_try_acquire(
                  fmt::format("mid-{}-{}", variant, i), short_lock, tuple_awaitable);
              ++completions[i];
              if (!ec) ++granted;
              leases[i] = std::move(lease);
            });
            BOOST_TEST(std::count(completions.begin(), completions.end(), 1) ==
                       static_cast<long>(count));
            BOOST_TEST(granted == count);
            // The toxic stays while the leases are released. On a loaded host the node can time out
            // early in the burst, after which acquire rounds skip it and fewer SETs than limit_data
            // allows reach it; releases are never skipped, so they spend the budget in any case.
            for (auto& lease : leases) {
              auto [ec] = co_await lease.async_release(tuple_awaitable);
              BOOST_TEST(!ec, ec.message());
            }
            nodes.proxies[2]->clear();
            // The connection was broken and re-established.
            const bool back = co_await eventually(
                [&] { return nodes.proxies[2]->connections_accepted() > accepted_before; }, 3s);
            BOOST_TEST(back, "the node's connection was never re-established");
            // The node votes again: once its reconnect backoff has passed, an acquire holds all
            // five.
            bool on_all_five = false;
            for (int attempt = 0; attempt < 20 && !on_all_five; ++attempt) {
              auto [ec, lease] =
                  co_await locks.async_try_acquire("mid-after", plain_lock(10s), tuple_awaitable);
              BOOST_TEST(!ec, lease.diagnostics());
              on_all_five =
                  co_await eventually([&] { return servers.present("mid-after") == 5; }, 200ms);
              auto [release_ec] = co_await lease.async_release(tuple_awaitable);
              BOOST_TEST(!release_ec, release_ec.message());
            }
            BOOST_TEST(on_all_five, "the node never voted again after its connection broke");
            BOOST_TEST(co_await eventually([&] { return servers.total_keys() == 0; }, 3s));
          });
        }
      }
    }
  }
}

// Scenario 6: a SET that reaches three nodes only after its round gave up (latency beyond
// node_timeout) is undone: the round's cleanup release travels behind it on each connection, so
// the key is deleted right after it is set, and nothing brings it back.
BOOST_AUTO_TEST_CASE(late_apply_is_cleaned_up) {
  for (const auto kind : redlock::test::every_link) {
    BOOST_TEST_CONTEXT(redlock::test::name_of(kind)) {
      proxied_fleet nodes(5, kind);
      inspector servers(nodes.fleet);
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), nodes.configs(), fast_client_options(100ms));
        BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
        for (std::size_t i = 0; i < 3; ++i)
          nodes.proxies[i]->set_latency(redlock::test::chaos_proxy::direction::upstream, 300ms);
        auto [ec, lease] =
            co_await locks.async_try_acquire("late", plain_lock(2s), tuple_awaitable);
        BOOST_TEST(ec == error::no_quorum, lease.diagnostics());
        // The delayed SETs land at about 300 ms; their releases follow on the same connections (as
        // EVAL, when the fresh servers answer the EVALSHA with NOSCRIPT after it timed out).
        std::array<bool, 3> seen{};  // each slow node was seen holding the key at some moment
        const bool landed = co_await eventually(
            [&] {
              for (std::size_t i = 0; i < seen.size(); ++i)
                seen[i] = seen[i] || servers.present_on({i}, "late") == 1;
              return seen[0] && seen[1] && seen[2];
            },
            3s, 1ms);
        BOOST_TEST(landed, "the late SETs never arrived: the scenario did not happen");
        const bool removed = co_await eventually([&] { return servers.present("late") == 0; }, 3s);
        BOOST_TEST(removed, "the late SETs were not undone");
        co_await sleep_for(500ms);
        BOOST_TEST(servers.present("late") == 0u);  // not resurrected
        for (auto& proxy : nodes.proxies)
          proxy->clear();
      });
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
