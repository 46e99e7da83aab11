// Nodes that are dead, stopped (SIGSTOP), blackholed, reset or slow, judged by what the clients
// saw and, where a hold is involved, by the mutual-exclusion checker: a minority costs at most one
// node_timeout and no safety, a majority fails fast and leaves no key behind.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/exclusion_verdict.hpp"
#include "support/five_nodes.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using redlock::test::ms_between;

using recorder = redlock::test::lock_recorder;
using redlock::test::plain_lock;
using redlock::test::proxied_fleet;
using redlock::test::settled_everywhere;

}  // namespace

BOOST_AUTO_TEST_SUITE(node_faults)

// Scenario 1, dead nodes: every up/down combination of five. With a majority up the lock is
// taken in about one node_timeout (dead nodes refuse at once, they cost no waiting); without one
// the acquire fails with no_quorum just as fast and leaves no key on the nodes that are up.
BOOST_FIXTURE_TEST_CASE(every_mask_of_dead_nodes, redlock::test::five_nodes) {
  for (unsigned mask = 0; mask < 32; ++mask) {
    const int down = std::popcount(mask);
    BOOST_TEST_CONTEXT("nodes down (bit mask) " << mask) {
      for (std::size_t i = 0; i < 5; ++i) {
        if ((mask >> i) & 1U) fleet[i].kill9();
      }
      const std::string resource = fmt::format("mask-{}", mask);
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        const auto start = steady_clock::now();
        auto [ec, lease] =
            co_await locks.async_try_acquire(resource, plain_lock(10s), tuple_awaitable);
        const auto took = ms_since(start);
        BOOST_TEST(took < 1500, "took " << took << " ms");
        if (down <= 2) {
          BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
          auto [release_ec] = co_await lease.async_release(tuple_awaitable);
          BOOST_TEST(!release_ec, release_ec.message());
        } else {
          BOOST_TEST(ec == error::no_quorum, ec.message() << ": " << lease.diagnostics());
        }
        // Failed rounds and releases clean up behind the decision; wait for the stragglers.
        const bool clean = co_await eventually([&] { return nodes.present(resource) == 0; }, 2s);
        BOOST_TEST(clean, "a key is left on a running node");
      });
      for (std::size_t i = 0; i < 5; ++i) {
        if (!fleet[i].running()) fleet[i].start();
      }
    }
  }
}

// Scenario 2: nodes stopped (SIGSTOP) during a hold. With one or two of five stopped, renewal
// goes on through the others for several TTLs; with three stopped, the loss is signalled before
// the validity ends and with_lock cancels its body.
BOOST_FIXTURE_TEST_CASE(paused_nodes_during_a_hold, redlock::test::five_nodes) {
  redlock::test::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::lock_options renewed = plain_lock(600ms);
    renewed.auto_renew = true;

    for (const std::size_t paused : {1, 2}) {
      BOOST_TEST_CONTEXT(paused << " of 5 stopped") {
        const std::string resource = fmt::format("paused-{}", paused);
        recorder holder(log, "holder", resource);
        auto lease = co_await holder.try_acquire(locks, renewed);
        BOOST_TEST_REQUIRE(!holder.last_error(), lease.diagnostics());
        for (std::size_t i = 0; i < paused; ++i)
          fleet[i].pause();
        co_await sleep_for(1800ms);  // three TTLs
        BOOST_TEST(lease.held(), lease.diagnostics());
        // The running nodes keep being refreshed: far more left than the 600 ms TTL minus 1.8 s.
        for (std::size_t i = paused; i < 5; ++i)
          BOOST_TEST(nodes.pttl(i, resource) > 200, "node " << i);
        for (std::size_t i = 0; i < paused; ++i)
          fleet[i].resume();
        BOOST_TEST(!co_await holder.release(lease));
      }
    }

    bool finished = false;
    error_code thrown;
    steady_clock::time_point valid_until{};
    steady_clock::time_point stopped_at{};
    try {
      co_await redlock::with_lock(locks, "paused-3", renewed,
                                  [&](redlock::lease& lease) -> asio::awaitable<void> {
                                    co_await sleep_for(100ms);
                                    for (std::size_t i = 0; i < 3; ++i)
                                      fleet[i].pause();
                                    valid_until = lease.valid_until();
                                    co_await sleep_for(10s);
                                    finished = true;
                                  });
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
      stopped_at = steady_clock::now();
    }
    for (std::size_t i = 0; i < 3; ++i)
      fleet[i].resume();
    BOOST_TEST(!finished);
    BOOST_TEST(thrown == error::lock_lost, thrown.message());
    // Signalled no later than the validity it had when the nodes stopped (plus scheduling slack).
    BOOST_TEST(ms_between(valid_until, stopped_at) < 100,
               "lost " << ms_between(valid_until, stopped_at) << " ms after the validity ended");
  });
  const auto result = redlock::test::judge_exclusion(log);
  BOOST_TEST(result.ok(), result.describe());
}

// Liveness with a minority silent (scenarios 1 to 3, and the soak's two-node stalls): once a
// stopped node has let one request's node_timeout pass, later rounds skip it instead of waiting
// for it again. A round split between rivals on the answering nodes is then decided in one round
// trip and frees at once what it took there, instead of holding it for node_timeout while the next
// rivals split the votes again. The round that did wait is cleaned up on the stopped nodes once
// they resume, and they are used again as soon as they answer.
BOOST_FIXTURE_TEST_CASE(split_rounds_do_not_wait_for_stopped_nodes_again,
                        redlock::test::five_nodes) {
  constexpr milliseconds node_timeout = 1000ms;  // long, so that "did not wait" is unambiguous
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(node_timeout));
    // Every connection past its handshake before two nodes stop: a ping succeeds at a quorum, and
    // a node stopped mid-handshake would fail with connect_timeout instead of being skipped. A
    // lock that every node holds shows that each one has run a request.
    auto [warm_ec, warm] = co_await locks.async_acquire("warm", plain_lock(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!warm_ec, warm.diagnostics());
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding("warm", warm.token()) == 5u; }, 3000ms));
    co_await warm.async_release(tuple_awaitable);
    const std::string resource = "split";
    nodes.set(2, resource, "rival", 60s);  // a rival took node 2 of the three that answer
    fleet[0].pause();
    fleet[1].pause();

    // Nodes 3 and 4 grant, node 2 refuses; nodes 0 and 1 could still grant until their deadline.
    auto start = steady_clock::now();
    auto [ec, lease] = co_await locks.async_try_acquire(resource, plain_lock(10s), tuple_awaitable);
    BOOST_TEST(ec == error::contended, lease.diagnostics());
    BOOST_TEST(ms_since(start) >= node_timeout.count() - 20);
    const std::string waited_token = lease.token();

    for (int round = 0; round < 3; ++round) {
      BOOST_TEST_CONTEXT("round " << round) {
        start = steady_clock::now();
        std::tie(ec, lease) =
            co_await locks.async_try_acquire(resource, plain_lock(10s), tuple_awaitable);
        BOOST_TEST(ec == error::contended, lease.diagnostics());
        BOOST_TEST(ms_since(start) < node_timeout.count() / 2, lease.diagnostics());
        BOOST_TEST(lease.diagnostics().find("not sent") != std::string::npos, lease.diagnostics());
        // What the round took on nodes 3 and 4 is released at once.
        BOOST_TEST(co_await eventually(
            [&] {
              return nodes.present_on({3, 4}, resource) == 0;
            },
            node_timeout / 2));
      }
    }

    fleet[0].resume();
    fleet[1].resume();
    // The first round's SETs run late on nodes 0 and 1, and its cleanup, queued behind them on
    // each connection, deletes them; the skipped rounds never reached those nodes.
    BOOST_TEST(co_await eventually([&] { return nodes.present_on({0, 1}, resource) == 0; }, 3s));
    BOOST_TEST(nodes.holding_on({2}, resource, "rival") == 1u);
    BOOST_TEST(nodes.holding_on({0, 1, 3, 4}, resource, waited_token) == 0u);

    // Their backlog answered, the resumed nodes vote again.
    nodes.set(2, resource, "rival", 1ms);
    co_await sleep_for(20ms);
    std::tie(ec, lease) =
        co_await locks.async_try_acquire(resource, plain_lock(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    BOOST_TEST(co_await settled_everywhere(nodes, resource, lease.token()));
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
  });
}

// A silent node: a round's SET times out, and the failed round's cleanup (a release, issued from
// inside that timeout with a later deadline of its own) must not delay the deadline of a PING
// issued before it. The PING times out one node_timeout after it was issued, not later.
BOOST_AUTO_TEST_CASE(deadlines_on_a_silent_node_fire_on_time_behind_a_cleanup) {
  redis_fleet fleet(1);
  constexpr milliseconds node_timeout = 400ms;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(node_timeout));
    auto ping_ec = co_await redlock::test::ping_until_answered(locks);
    BOOST_TEST_REQUIRE(!ping_ec);
    fleet[0].pause();
    std::optional<error_code> acquired;
    locks.async_try_acquire("silent", plain_lock(10s),
                            [&](error_code ec, redlock::lease) { acquired = ec; });
    co_await sleep_for(node_timeout / 2);
    const auto ping_start = steady_clock::now();
    ping_ec = std::get<0>(co_await locks.async_ping(tuple_awaitable));
    const auto took = ms_since(ping_start);
    BOOST_TEST(ping_ec == error::no_quorum, ping_ec.message());
    BOOST_TEST(acquired.has_value());
    BOOST_TEST(took >= node_timeout.count() - 10);
    BOOST_TEST(took < node_timeout.count() + 120, "the PING timed out after " << took << " ms");
    fleet[0].resume();
  });
}

// Scenario 1 through proxies: nodes that accept and never answer (blackhole), and nodes whose
// connections are reset. A blackholed node costs one node_timeout to the round, not one per node;
// without a majority the acquire fails with no_quorum and leaves nothing on any node.
BOOST_AUTO_TEST_CASE(every_mask_of_blackholed_or_reset_nodes) {
  for (const auto kind : redlock::test::every_link) {
    BOOST_TEST_CONTEXT(redlock::test::name_of(kind)) {
      proxied_fleet nodes(5, kind);
      inspector servers(nodes.fleet);
      constexpr milliseconds node_timeout = 150ms;
      for (const bool reset : {false, true}) {
        for (unsigned mask = 0; mask < 32; ++mask) {
          const int down = std::popcount(mask);
          BOOST_TEST_CONTEXT((reset ? "reset" : "blackholed") << " nodes (bit mask) " << mask) {
            for (std::size_t i = 0; i < 5; ++i) {
              if (((mask >> i) & 1U) == 0) continue;
              reset ? nodes.proxies[i]->set_reset_peer(true)
                    : nodes.proxies[i]->set_blackhole(true);
            }
            const std::string resource = fmt::format("{}-{}", reset ? "reset" : "hole", mask);
            run_async([&](asio::io_context& io) -> asio::awaitable<void> {
              redlock::client locks(io.get_executor(), nodes.configs(),
                                    fast_client_options(node_timeout));
              const auto start = steady_clock::now();
              auto [ec, lease] =
                  co_await locks.async_try_acquire(resource, plain_lock(10s), tuple_awaitable);
              const auto took = ms_since(start);
              // One node_timeout at most, plus scheduling slack; never one per bad node.
              BOOST_TEST(took < node_timeout.count() + 400, "took " << took << " ms");
              if (down <= 2) {
                BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
                auto [release_ec] = co_await lease.async_release(tuple_awaitable);
                BOOST_TEST(!release_ec, release_ec.message());
              } else {
                BOOST_TEST(ec == error::no_quorum, ec.message() << ": " << lease.diagnostics());
              }
              const bool clean =
                  co_await eventually([&] { return servers.present(resource) == 0; }, 2s);
              BOOST_TEST(clean, "a key is left on a node");
            });
            for (auto& proxy : nodes.proxies)
              proxy->clear();
          }
        }
      }
    }
  }
}

// Scenario 3: a node slower than node_timeout (proxy latency, CLIENT PAUSE WRITE, DEBUG SLEEP)
// counts as a no-vote; the round is decided by the others in about one node_timeout. Its late
// +OK is matched to the SET it answers and dropped, never to a later command: the next acquire on
// the same connection works, and the late SET was undone by the round's own cleanup.
BOOST_AUTO_TEST_CASE(slow_node_is_a_no_vote_and_its_late_reply_pairs_correctly) {
  for (const auto kind : redlock::test::every_link) {
    BOOST_TEST_CONTEXT(redlock::test::name_of(kind)) {
      proxied_fleet nodes(5, kind);
      inspector servers(nodes.fleet);
      constexpr milliseconds node_timeout = 100ms;
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client five(io.get_executor(), nodes.configs(), fast_client_options(node_timeout));
        std::vector<redlock::node_config> slow_only = {nodes.config(0)};
        redlock::client single(io.get_executor(), slow_only, fast_client_options(node_timeout));
        BOOST_TEST_REQUIRE(co_await nodes.connect(five));
        BOOST_TEST_REQUIRE(!co_await redlock::test::ping_until_answered(single));

        enum class slowness { latency, client_pause, debug_sleep };
        for (const auto how : {slowness::latency, slowness::client_pause, slowness::debug_sleep}) {
          BOOST_TEST_CONTEXT("slowness " << static_cast<int>(how)) {
            std::thread sleeper;
            switch (how) {
              case slowness::latency:
                nodes.proxies[0]->set_latency(redlock::test::chaos_proxy::direction::downstream,
                                              400ms);
                break;
              case slowness::client_pause: {
                sync_client admin(nodes.fleet[0].port());
                admin.command({"CLIENT", "PAUSE", "400", "WRITE"});
                break;
              }
              case slowness::debug_sleep:
                sleeper = std::thread([&] {
                  sync_client admin(nodes.fleet[0].port(), {}, {}, 5s);
                  admin.command({"DEBUG", "SLEEP", "0.4"});
                });
                std::this_thread::sleep_for(50ms);  // the sleep has begun
                break;
            }
            const std::string key = fmt::format("slow-{}", static_cast<int>(how));
            const auto start = steady_clock::now();
            auto [ec, lease] =
                co_await five.async_try_acquire(key, plain_lock(10s), tuple_awaitable);
            BOOST_TEST(!ec, lease.diagnostics());
            BOOST_TEST(ms_since(start) < node_timeout.count() + 300);
            auto [single_ec, single_lease] = co_await single.async_try_acquire(
                key + "-single", plain_lock(10s), tuple_awaitable);
            BOOST_TEST(single_ec == error::no_quorum, single_lease.diagnostics());

            co_await sleep_for(600ms);  // the late replies arrive
            if (sleeper.joinable()) sleeper.join();
            nodes.proxies[0]->clear();
            auto [release_ec] = co_await lease.async_release(tuple_awaitable);
            BOOST_TEST(!release_ec, release_ec.message());
            // The late SET of the single-node round was deleted by that round's cleanup, which
            // travelled behind it on the same connection.
            BOOST_TEST(
                co_await eventually([&] { return servers.present(key + "-single") == 0; }, 2s));
            // The connection is still in step: a fresh acquire gets its own +OK.
            auto [again_ec, again] =
                co_await single.async_try_acquire(key + "-again", plain_lock(10s), tuple_awaitable);
            BOOST_TEST(!again_ec, again.diagnostics());
            auto [again_release] = co_await again.async_release(tuple_awaitable);
            BOOST_TEST(!again_release);
          }
        }
      });
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
