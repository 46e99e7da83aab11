// Safety under faults, judged by the mutual-exclusion checker (support/history.hpp) over what the
// clients saw. Each unsafe variant (a release by plain DEL, a renewal that re-SETs, a holder that
// ignores its validity, a node restarted at once) must make the checker report an overlap, and the
// library's own behaviour in the same situation must not: a checker that cannot fail proves
// nothing.

#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/lock_workload.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized_build = true;
#else
constexpr bool sanitized_build = false;
#endif

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;
using redlock::test::eventually;
using redlock::test::eventually_blocking;
using redlock::test::fast_client_options;
using redlock::test::inspector;
using redlock::test::mono_now;
using redlock::test::ms_between;
using redlock::test::ms_since;
using redlock::test::op_kind;
using redlock::test::op_result;
using redlock::test::redis_fleet;
using redlock::test::run_async;
using redlock::test::sleep_for;
using redlock::test::sync_client;
using redlock::test::to_mono_ns;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

using redlock::test::tuple_awaitable;

using recorder = redlock::test::lock_recorder;
using redlock::test::plain_lock;
using redlock::test::proxied_fleet;

void on_every_node(redis_fleet& fleet, std::initializer_list<std::string_view> command) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet[i].running()) continue;
    sync_client client(fleet[i].port(), {}, {}, 2s);
    client.command(command);
  }
}

redlock::test::check_result check(const redlock::test::history& log) {
  const auto result = redlock::test::check_mutual_exclusion(log.events());
  BOOST_TEST_MESSAGE(result.describe());
  return result;
}

// Runs `scenario(io, fleet, log, unsafe)` as the unsafe variant and then as the library does it,
// each on a fresh fleet, and expects the checker to report an overlap for the unsafe run only.
template <class Scenario>
void only_the_unsafe_variant_overlaps(std::string_view unsafe_name, std::string_view safe_name,
                                      Scenario scenario) {
  for (const bool unsafe : {true, false}) {
    BOOST_TEST_CONTEXT((unsafe ? unsafe_name : safe_name)) {
      redis_fleet fleet(5);
      redlock::test::history log;
      run_async([&](asio::io_context& io) { return scenario(io, fleet, log, unsafe); });
      const auto result = check(log);
      BOOST_TEST(result.ok() == !unsafe, result.describe());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(faults)

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

// A holder whose lock expired releases with a plain DEL: it deletes the next holder's key, and a
// third client gets in while the second still holds. The token-checked release does not.
BOOST_AUTO_TEST_CASE(release_by_plain_del_is_caught_and_the_library_is_safe) {
  only_the_unsafe_variant_overlaps(
      "plain DEL", "token-checked release",
      [](asio::io_context& io, redis_fleet& fleet, redlock::test::history& log,
         bool unsafe) -> asio::awaitable<void> {
        redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
        redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
        redlock::client c_locks(io.get_executor(), fleet.configs(), fast_client_options());
        recorder a(log, "a", "r");
        recorder b(log, "b", "r");
        recorder c(log, "c", "r");

        auto a_lease = co_await a.try_acquire(a_locks, plain_lock(300ms));
        BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
        co_await sleep_for(400ms);  // a "GC pause" longer than the validity
        BOOST_TEST(!a_lease.held());
        auto b_lease = co_await b.try_acquire(b_locks, plain_lock(5s));
        BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());

        if (unsafe) {
          const auto invoke = mono_now();
          on_every_node(fleet, {"DEL", "r"});
          a.record_released(a_lease.token(), invoke);
        } else {
          const auto ec = co_await a.release(a_lease);
          BOOST_TEST(ec == error::not_held, ec.message());
        }
        auto c_lease = co_await c.try_acquire(c_locks, plain_lock(5s));
        BOOST_TEST((!c.last_error()) == unsafe, c.last_error().message());
        co_await sleep_for(50ms);  // both "work" now, if both believe they hold
        co_await b.release(b_lease);
        if (c_lease.held()) co_await c.release(c_lease);
      });
}

// A renewal that re-SETs the key after it expired overwrites the rival's lock and believes it
// holds again. The library's token-checked PEXPIRE finds a foreign key and reports not_held.
BOOST_AUTO_TEST_CASE(renewal_by_re_set_is_caught_and_the_library_is_safe) {
  only_the_unsafe_variant_overlaps(
      "re-SET renewal", "token-checked extend",
      [](asio::io_context& io, redis_fleet& fleet, redlock::test::history& log,
         bool unsafe) -> asio::awaitable<void> {
        inspector nodes(fleet);
        redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
        redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
        recorder a(log, "a", "r");
        recorder b(log, "b", "r");

        auto a_lease = co_await a.try_acquire(a_locks, plain_lock(300ms));
        BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
        co_await sleep_for(400ms);  // the renewal comes too late
        auto b_lease = co_await b.try_acquire(b_locks, plain_lock(5s));
        BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());
        // Decided at three grants; the other two SETs are still on their way.
        BOOST_TEST_REQUIRE(
            co_await eventually([&] { return nodes.holding("r", b_lease.token()) == 5; }, 2s));

        if (unsafe) {
          const auto invoke = mono_now();
          on_every_node(fleet, {"SET", "r", a_lease.token(), "PX", "5000"});
          a.record_acquired(a_lease.token(), invoke, mono_now() + 4'900'000'000);
          BOOST_TEST(nodes.holding("r", b_lease.token()) == 0u);  // the rival's lock is gone
        } else {
          auto [ec] = co_await a_lease.async_extend(5s, tuple_awaitable);
          BOOST_TEST(ec == error::not_held, ec.message());
          BOOST_TEST(nodes.holding("r", b_lease.token()) == 5u);  // untouched
        }
        co_await sleep_for(50ms);  // both "work" now, if both believe they hold
        co_await b.release(b_lease);
      });
}

// A holder paused past its validity that goes on working as if it held the lock overlaps the next
// holder; one that trusts the lease's validity (what lease::held() reports) does not.
BOOST_AUTO_TEST_CASE(holder_ignoring_its_validity_is_caught) {
  only_the_unsafe_variant_overlaps(
      "ignores validity", "trusts validity",
      [](asio::io_context& io, redis_fleet& fleet, redlock::test::history& log,
         bool unsafe) -> asio::awaitable<void> {
        redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
        redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
        recorder a(log, "a", "r");
        recorder b(log, "b", "r");

        const auto invoke = mono_now();
        auto [ec, a_lease] =
            co_await a_locks.async_try_acquire("r", plain_lock(200ms), tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, a_lease.diagnostics());
        // The unsafe holder believes it holds until it releases; the safe one until valid_until.
        a.record_acquired(a_lease.token(), invoke,
                          unsafe ? std::numeric_limits<redlock::test::mono_ns>::max()
                                 : to_mono_ns(a_lease.valid_until()));
        co_await sleep_for(300ms);
        BOOST_TEST(!a_lease.held());
        auto b_lease = co_await b.try_acquire(b_locks, plain_lock(5s));
        BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());
        co_await sleep_for(50ms);
        co_await a.release(a_lease);
        co_await b.release(b_lease);
      });
}

// Scenario 9: nodes without persistence that restart at once forget the lock, and a rival takes
// it while the first holder is still valid. This is Redlock's documented limit; the remedy is to
// keep a restarted node out for longer than the largest TTL, after which there is no overlap.
BOOST_AUTO_TEST_CASE(restart_without_delay_breaks_exclusion_delayed_restart_does_not) {
  only_the_unsafe_variant_overlaps(
      "immediate restart", "restart after the TTL",
      [](asio::io_context& io, redis_fleet& fleet, redlock::test::history& log,
         bool immediate) -> asio::awaitable<void> {
        const milliseconds ttl = immediate ? 3000ms : 300ms;
        redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
        recorder a(log, "a", "r");
        recorder b(log, "b", "r");
        auto a_lease = co_await a.try_acquire(a_locks, plain_lock(ttl));
        BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
        // Every SET must have landed before the restart, or a node might come back holding it.
        inspector nodes(fleet);
        const bool settled =
            co_await eventually([&] { return nodes.holding("r", a_lease.token()) == 5; }, 2s);
        BOOST_TEST_REQUIRE(settled);

        for (std::size_t i = 0; i < 3; ++i)
          fleet[i].kill9();
        if (!immediate) co_await sleep_for(ttl + 100ms);
        for (std::size_t i = 0; i < 3; ++i)
          fleet[i].start();

        redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
        auto b_lease = co_await b.try_acquire(b_locks, plain_lock(5s));
        BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());
        co_await sleep_for(50ms);
        co_await b.release(b_lease);
        if (a_lease.held()) co_await a.release(a_lease);
      });
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
  const auto result = check(log);
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
    auto [ping_ec] = co_await locks.async_ping(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ping_ec);
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
    BOOST_TEST(nodes.holding(resource, lease.token()) == 5u);
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
    auto [ping_ec] = co_await locks.async_ping(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ping_ec);
    fleet[0].pause();
    std::optional<error_code> acquired;
    locks.async_try_acquire("silent", plain_lock(10s),
                            [&](error_code ec, redlock::lease) { acquired = ec; });
    co_await sleep_for(node_timeout / 2);
    const auto ping_start = steady_clock::now();
    std::tie(ping_ec) = co_await locks.async_ping(tuple_awaitable);
    const auto took = ms_since(ping_start);
    BOOST_TEST(ping_ec == error::no_quorum, ping_ec.message());
    BOOST_TEST(acquired.has_value());
    BOOST_TEST(took >= node_timeout.count() - 10);
    BOOST_TEST(took < node_timeout.count() + 120, "the PING timed out after " << took << " ms");
    fleet[0].resume();
  });
}

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
  const auto result = check(log);
  BOOST_TEST(result.ok(), result.describe());
}

// Scenario 1 through proxies: nodes that accept and never answer (blackhole), and nodes whose
// connections are reset. A blackholed node costs one node_timeout to the round, not one per node;
// without a majority the acquire fails with no_quorum and leaves nothing on any node.
BOOST_AUTO_TEST_CASE(every_mask_of_blackholed_or_reset_nodes) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  constexpr milliseconds node_timeout = 150ms;
  for (const bool reset : {false, true}) {
    for (unsigned mask = 0; mask < 32; ++mask) {
      const int down = std::popcount(mask);
      BOOST_TEST_CONTEXT((reset ? "reset" : "blackholed") << " nodes (bit mask) " << mask) {
        for (std::size_t i = 0; i < 5; ++i) {
          if (((mask >> i) & 1U) == 0) continue;
          reset ? nodes.proxies[i]->set_reset_peer(true) : nodes.proxies[i]->set_blackhole(true);
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

// Scenario 3: a node slower than node_timeout (proxy latency, CLIENT PAUSE WRITE, DEBUG SLEEP)
// counts as a no-vote; the round is decided by the others in about one node_timeout. Its late
// +OK is matched to the SET it answers and dropped, never to a later command: the next acquire on
// the same connection works, and the late SET was undone by the round's own cleanup.
BOOST_AUTO_TEST_CASE(slow_node_is_a_no_vote_and_its_late_reply_pairs_correctly) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  constexpr milliseconds node_timeout = 100ms;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client five(io.get_executor(), nodes.configs(), fast_client_options(node_timeout));
    std::vector<redlock::node_config> slow_only = {nodes.proxies[0]->config()};
    redlock::client single(io.get_executor(), slow_only, fast_client_options(node_timeout));
    BOOST_TEST_REQUIRE(co_await nodes.connect(five));
    BOOST_TEST_REQUIRE(!std::get<0>(co_await single.async_ping(tuple_awaitable)));

    enum class slowness { latency, client_pause, debug_sleep };
    for (const auto how : {slowness::latency, slowness::client_pause, slowness::debug_sleep}) {
      BOOST_TEST_CONTEXT("slowness " << static_cast<int>(how)) {
        std::thread sleeper;
        switch (how) {
          case slowness::latency:
            nodes.proxies[0]->set_latency(redlock::test::chaos_proxy::direction::downstream, 400ms);
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
        auto [ec, lease] = co_await five.async_try_acquire(key, plain_lock(10s), tuple_awaitable);
        BOOST_TEST(!ec, lease.diagnostics());
        BOOST_TEST(ms_since(start) < node_timeout.count() + 300);
        auto [single_ec, single_lease] =
            co_await single.async_try_acquire(key + "-single", plain_lock(10s), tuple_awaitable);
        BOOST_TEST(single_ec == error::no_quorum, single_lease.diagnostics());

        co_await sleep_for(600ms);  // the late replies arrive
        if (sleeper.joinable()) sleeper.join();
        nodes.proxies[0]->clear();
        auto [release_ec] = co_await lease.async_release(tuple_awaitable);
        BOOST_TEST(!release_ec, release_ec.message());
        // The late SET of the single-node round was deleted by that round's cleanup, which
        // travelled behind it on the same connection.
        BOOST_TEST(co_await eventually([&] { return servers.present(key + "-single") == 0; }, 2s));
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

// Scenario 4: connections broken in the middle of a pipeline on one node while 200 acquires are
// in flight: reset by the proxy (reset_peer), closed after a few kilobytes (limit_data), or killed
// by the server itself (CLIENT KILL). Every operation completes exactly once, the other four nodes
// carry every acquire, and the node's connection comes back.
BOOST_AUTO_TEST_CASE(connection_reset_mid_pipeline) {
  enum class breaker { reset_peer, limit_data, client_kill };
  proxied_fleet nodes;
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
          nodes.proxies[2]->set_limit_data(redlock::test::chaos_proxy::direction::upstream, 3000);
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
          auto [ec, lease] = co_await locks.async_try_acquire(fmt::format("mid-{}-{}", variant, i),
                                                              short_lock, tuple_awaitable);
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
        // The node votes again: once its reconnect backoff has passed, an acquire holds all five.
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

// Scenario 6: a SET that reaches three nodes only after its round gave up (latency beyond
// node_timeout) is undone: the round's cleanup release travels behind it on each connection, so
// the key is deleted right after it is set, and nothing brings it back.
BOOST_AUTO_TEST_CASE(late_apply_is_cleaned_up) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes.configs(), fast_client_options(100ms));
    BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
    for (std::size_t i = 0; i < 3; ++i)
      nodes.proxies[i]->set_latency(redlock::test::chaos_proxy::direction::upstream, 300ms);
    auto [ec, lease] = co_await locks.async_try_acquire("late", plain_lock(2s), tuple_awaitable);
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

namespace {

// How an operation in flight is ended in scenario 8.
enum class ending { cancel_terminal, cancel_partial, destroy_client };
constexpr std::array<ending, 3> endings = {ending::cancel_terminal, ending::cancel_partial,
                                           ending::destroy_client};
constexpr std::string_view name_of(ending e) {
  switch (e) {
    case ending::cancel_terminal:
      return "terminal cancellation";
    case ending::cancel_partial:
      return "partial cancellation";
    case ending::destroy_client:
      return "client destroyed";
  }
  return "?";
}

}  // namespace

// Scenario 8: an acquire ended after 0, 1, ... 5 of its 5 replies, by terminal or partial
// cancellation or by destroying its client. Nodes 0 and 1 hold a rival's key and node i answers
// after about i x 200 ms, so the round stays open until the fifth reply decides it. Every acquire
// completes exactly once, at once; an ended one fails with operation_aborted; and once the delayed
// traffic has drained, no node holds its key (the rival's keys are untouched).
BOOST_AUTO_TEST_CASE(acquire_ended_at_every_reply_count) {
  constexpr milliseconds step = 200ms;
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        int round = 0;
        for (const ending how : endings) {
          for (std::size_t replies = 0; replies <= 5; ++replies) {
            BOOST_TEST_CONTEXT(name_of(how) << " after " << replies << " replies") {
              const std::string key = fmt::format("ended-{}", round++);
              for (std::size_t i = 0; i < 2; ++i) {
                sync_client rival(nodes.fleet[i].port());
                rival.command({"SET", key, "rival", "PX", "60000"});
              }
              auto locks = std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                             fast_client_options(4 * step + 1s));
              BOOST_TEST_REQUIRE(co_await nodes.connect(*locks));
              nodes.stagger_replies(step);

              asio::cancellation_signal signal;
              int completions = 0;
              error_code result;
              redlock::lease lease;
              const auto start = steady_clock::now();
              locks->async_acquire(
                  key, plain_lock(10s),
                  asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, redlock::lease l) {
                    ++completions;
                    result = ec;
                    lease = std::move(l);
                  }));
              // Reply j arrives at about j x step; end the operation halfway to the next one.
              if (replies > 0 && replies < 5) co_await sleep_for(step * replies - step / 2);
              if (replies == 5) co_await eventually([&] { return completions > 0; }, 4 * step + 1s);
              const auto ended = steady_clock::now();
              BOOST_TEST(completions == (replies == 5 ? 1 : 0));
              switch (how) {
                case ending::cancel_terminal:
                  signal.emit(asio::cancellation_type::terminal);
                  break;
                case ending::cancel_partial:
                  signal.emit(asio::cancellation_type::partial);
                  break;
                case ending::destroy_client:
                  locks.reset();
                  break;
              }
              BOOST_TEST(co_await eventually([&] { return completions > 0; }, 1s));
              BOOST_TEST(ms_since(ended) < 500);
              if (replies == 5) {
                BOOST_TEST(!result, result.message());
                BOOST_TEST(ms_between(start, ended) >= 4 * step.count() - 50);
                if (locks) {
                  auto [release_ec] = co_await lease.async_release(tuple_awaitable);
                  BOOST_TEST(!release_ec, release_ec.message());
                } else {
                  BOOST_TEST(!lease.held());  // the client's end released it
                }
              } else {
                BOOST_TEST(result == asio::error::operation_aborted, result.message());
                BOOST_TEST(!lease.held());
              }

              // Requests reach node 4 after 2 x step: once the cleanup written at `ended` has
              // landed only the rival's keys remain.
              co_await sleep_for(2 * step + 100ms - (steady_clock::now() - ended));
              const bool clean = co_await eventually(
                  [&] {
                    return servers.present(key) == 2 &&
                           servers.holding_on({0, 1}, key, "rival") == 2;
                  },
                  4 * step + 2s);
              BOOST_TEST(clean, servers.present(key) << " nodes hold " << key);
              co_await sleep_for(step);  // nothing comes back
              BOOST_TEST(servers.present(key) == 2u);
              BOOST_TEST(completions == 1);
              nodes.clear_toxics();
            }
          }
        }
      },
      300s);
}

// Scenario 8, the lease's side: a held lease whose extension or release is in flight is destroyed
// after 0 to 5 of the replies. The operation completes exactly once, and the lock is gone from
// every node once the delayed traffic has drained: destroying a lease releases it.
BOOST_AUTO_TEST_CASE(lease_destroyed_with_an_operation_in_flight) {
  constexpr milliseconds step = 200ms;
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), nodes.configs(),
                              fast_client_options(4 * step + 1s));
        BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
        int round = 0;
        for (const bool extending : {true, false}) {
          for (std::size_t replies = 0; replies <= 5; ++replies) {
            BOOST_TEST_CONTEXT((extending ? "extend" : "release")
                               << " with " << replies << " replies in") {
              const std::string key = fmt::format("dropped-{}", round++);
              auto lease = std::make_unique<redlock::lease>();
              std::tie(std::ignore, *lease) =
                  co_await locks.async_acquire(key, plain_lock(10s), tuple_awaitable);
              BOOST_TEST_REQUIRE(lease->held(), lease->diagnostics());
              BOOST_TEST(co_await eventually([&] { return servers.present(key) == 5; }, 2s));
              nodes.stagger_replies(step);

              int completions = 0;
              error_code result;
              auto record = [&](error_code ec) {
                ++completions;
                result = ec;
              };
              if (extending) {
                lease->async_extend(20s, record);
              } else {
                lease->async_release(record);
              }
              if (replies > 0 && replies < 5) co_await sleep_for(step * replies - step / 2);
              if (replies == 5) co_await sleep_for(4 * step + step / 2);
              lease.reset();
              const auto ended = steady_clock::now();
              BOOST_TEST(co_await eventually([&] { return completions > 0; }, 4 * step + 1s));
              BOOST_TEST_MESSAGE("completed with " << result.message());
              co_await sleep_for(2 * step + 100ms - (steady_clock::now() - ended));
              const bool gone =
                  co_await eventually([&] { return servers.present(key) == 0; }, 4 * step + 2s);
              BOOST_TEST(gone, servers.present(key) << " nodes still hold " << key);
              co_await sleep_for(step);
              BOOST_TEST(servers.present(key) == 0u);
              BOOST_TEST(completions == 1);
              nodes.clear_toxics();
            }
          }
        }
      },
      300s);
}

namespace {

// One contender process of the soak: its own io_context and client, its history and figures
// written to files for the parent. Runs in a forked child, so it reports by exit code only.
//
// The child is forked before the parent starts any thread (the proxies run on threads of their
// own): forking a multithreaded process leaves the child with whatever locks the other threads
// held, which hangs the sanitizers' allocator. So the child waits on `ports` for the proxies'
// ports, written by the parent once they exist; an end of file there means the parent gave up.
// Contender `index` of a process, on its own: named "pN.cI" in the history.
redlock::test::workload_options single_contender(redlock::test::workload_options options,
                                                 std::size_t index) {
  options.process = fmt::format("{}.c{}", options.process, index);
  options.contenders = 1;
  return options;
}

[[noreturn]] void soak_child(int ports, std::size_t node_count,
                             redlock::test::workload_options options,
                             const std::filesystem::path& out) {
  int code = 0;
  try {
    std::vector<redlock::node_config> nodes(node_count);
    for (auto& node : nodes) {
      std::uint16_t port = 0;
      if (::read(ports, &port, sizeof port) != static_cast<ssize_t>(sizeof port))
        throw std::runtime_error("no proxy port from the parent");
      node.port = port;
    }
    ::close(ports);
    // Each contender has a client of its own, so that all of them meet only at the nodes: the
    // local queue of one client would keep the lock within that client (see the note on
    // fairness in client.hpp), and the soak is about exclusion between independent holders.
    redlock::test::history log;
    redlock::test::workload_stats stats;
    run_async(
        [&](asio::io_context& io) -> asio::awaitable<void> {
          co_await redlock::test::run_all(options.contenders, [&](std::size_t c) {
            return [](asio::io_context& io, const std::vector<redlock::node_config>& nodes,
                      redlock::test::workload_options one, redlock::test::history& log,
                      redlock::test::workload_stats& stats) -> asio::awaitable<void> {
              // A node_timeout of a tenth of the TTL, as in production: a round split between
              // contenders waits for its silent nodes that long, holding keys on the others.
              redlock::client locks(io.get_executor(), nodes, fast_client_options(50ms));
              redlock::test::workload_stats mine;
              co_await redlock::test::run_lock_workload(locks, std::move(one), log, mine);
              stats.merge(mine);
            }(io, nodes, single_contender(options, c), log, stats);
          });
        },
        std::chrono::duration_cast<std::chrono::seconds>(options.duration) + 60s);
    std::ofstream history_file(out.string() + ".history");
    log.write(history_file);
    std::ofstream stats_file(out.string() + ".stats");
    stats_file << stats.acquisitions << ' ' << stats.increments << ' ' << stats.max_occupancy << ' '
               << stats.lost_before_write << '\n';
    for (const auto at : stats.acquired_at)
      stats_file << at << '\n';
    for (const auto& [what, count] : stats.failures)
      std::fprintf(stderr, "%s: %s x%llu\n", options.process.c_str(), what.c_str(),
                   static_cast<unsigned long long>(count));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", options.process.c_str(), e.what());
    code = 1;
  }
  std::_Exit(code);
}

std::chrono::seconds soak_duration() {
  if (const char* text = std::getenv("REDLOCK_SOAK_SECONDS"))
    return std::chrono::seconds(std::atoi(text));
  return 60s;
}

// The soak's nemesis. Each fault hits one or two nodes (a majority stays up) or, one time in five,
// three of them (the lock cannot be taken or kept until they are back). Every fault is undone
// after `out`, which is longer than the TTL, so a killed node comes back empty only after every
// key it held has expired elsewhere: the delayed-restart remedy of scenario 9.
enum class fault {
  kill,          // 1: SIGKILL, restarted after `out`
  stop,          // 2: SIGSTOP during holds, SIGCONT after `out`
  delay,         // 3, 6, 7: traffic held beyond node_timeout: late SETs, late renewals
  client_pause,  // 3, 6: CLIENT PAUSE WRITE: SETs and scripts wait, then run late
  reset,         // 4: every connection reset, new ones too, for `out`
  cut,           // 4: each connection closed after a few hundred bytes (mid-pipeline)
  client_kill,   // 4: CLIENT KILL TYPE normal, twice during `out`
  stall,         // 1: bytes dropped, then the connection closed (a partition, as TCP sees it)
};
constexpr std::array<std::string_view, 8> fault_names = {
    "kill", "stop", "delay", "client_pause", "reset", "cut", "client_kill", "stall"};

// The faults the nemesis picks from: all, or those named in REDLOCK_SOAK_FAULTS ("stall,cut"),
// to study one kind at a time.
std::vector<fault> soak_faults() {
  std::vector<fault> chosen;
  const char* text = std::getenv("REDLOCK_SOAK_FAULTS");
  const std::string_view list = text == nullptr ? "" : text;
  for (std::size_t f = 0; f < fault_names.size(); ++f) {
    if (list.empty() || list.find(fault_names[f]) != std::string_view::npos)
      chosen.push_back(static_cast<fault>(f));
  }
  if (chosen.empty()) throw std::invalid_argument("REDLOCK_SOAK_FAULTS names no known fault");
  return chosen;
}

// The longest of a series of gaps, and how many exceeded a bound.
struct gap_report {
  redlock::test::mono_ns longest = 0;
  redlock::test::mono_ns longest_from = 0;
  std::size_t over_ttl = 0;

  void add(redlock::test::mono_ns from, redlock::test::mono_ns to, redlock::test::mono_ns ttl) {
    const auto gap = to - from;
    if (gap > ttl) ++over_ttl;
    if (gap > longest) {
      longest = gap;
      longest_from = from;
    }
  }
};

struct fault_window {
  redlock::test::mono_ns begin = 0;
  redlock::test::mono_ns end = 0;
  bool majority = false;
  std::string what;  // "stop 1,3", for failure messages
};

}  // namespace

// Scenario 10, nemesis soak: 4 processes x 8 contenders, each with its own client, on one
// resource, connected only through the nodes, each node behind a chaos proxy, while the nemesis
// above strikes every 2 to 5 s. Checked: no two holders overlap, the witness counter saw every
// increment, at most one contender was ever inside, no lock key is left, and while a majority was
// up the lock was taken at least once per TTL (a gap is excused only when it meets a fault on a
// majority, or the two seconds after one).
// REDLOCK_SOAK_SECONDS sets the length (60 s by default).
BOOST_AUTO_TEST_CASE(nemesis_soak) {
  constexpr std::size_t processes = 4;
  constexpr std::size_t node_count = 5;
  const milliseconds ttl = 500ms;
  redis_fleet fleet(node_count);
  redlock::test::redis_server witness_server;
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("redlock-soak-{}", ::getpid());
  std::filesystem::create_directories(dir);

  redlock::test::workload_options options;
  options.resource = "soak";
  options.contenders = 8;
  options.duration = soak_duration();
  options.lock = plain_lock(ttl);
  options.lock.auto_renew = true;
  options.lock.wait = 3s;
  // Backoff capped at a tenth of the TTL, like node_timeout: contenders that collided come back
  // well within one TTL.
  options.lock.retry = {5ms, 50ms, 2.0};
  options.hold_min = 1ms;
  options.hold_max = 20ms;
  options.witness = witness_server.config();

  std::vector<pid_t> children;
  std::vector<int> port_pipes;
  for (std::size_t p = 0; p < processes; ++p) {
    int ends[2];
    BOOST_TEST_REQUIRE(::pipe(ends) == 0);
    options.process = fmt::format("p{}", p);
    const pid_t child = ::fork();
    BOOST_TEST_REQUIRE(child >= 0);
    if (child == 0) {
      ::close(ends[1]);
      for (const int earlier : port_pipes)
        ::close(earlier);
      soak_child(ends[0], node_count, options, dir / options.process);
    }
    ::close(ends[0]);
    children.push_back(child);
    port_pipes.push_back(ends[1]);
  }

  // Threads may start now.
  std::vector<std::unique_ptr<redlock::test::chaos_proxy>> proxies;
  for (std::size_t i = 0; i < node_count; ++i)
    proxies.push_back(std::make_unique<redlock::test::chaos_proxy>(fleet[i].port()));
  for (const int pipe : port_pipes) {
    for (const auto& proxy : proxies) {
      const std::uint16_t port = proxy->port();
      BOOST_TEST_REQUIRE(::write(pipe, &port, sizeof port) == static_cast<ssize_t>(sizeof port));
    }
    ::close(pipe);
  }
  const auto start_time = steady_clock::now();

  std::minstd_rand random(std::random_device{}());
  const auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  const auto end = start_time + options.duration;
  const std::vector<fault> faults = soak_faults();
  std::vector<fault_window> windows;
  std::array<int, fault_names.size()> fault_counts{};
  while (steady_clock::now() + 2s < end) {
    std::this_thread::sleep_for(milliseconds(pick(2000, 5000)));
    if (steady_clock::now() + 1s >= end) break;
    const bool majority = pick(0, 4) == 0;
    const std::size_t how_many = majority ? 3 : static_cast<std::size_t>(pick(1, 2));
    std::vector<std::size_t> victims(node_count);
    std::iota(victims.begin(), victims.end(), std::size_t{0});
    std::shuffle(victims.begin(), victims.end(), random);
    victims.resize(how_many);
    const fault what =
        faults[static_cast<std::size_t>(pick(0, static_cast<int>(faults.size()) - 1))];
    const milliseconds out(pick(600, 2000));   // > TTL
    const milliseconds delay(pick(150, 600));  // > node_timeout, sometimes > TTL

    const auto admin = [&](std::size_t v, std::initializer_list<std::string_view> command) {
      sync_client client(fleet[v].port(), {}, {}, 2s);
      client.command(command);
    };
    const std::string pause_ms = std::to_string(out.count());
    std::string what_text = std::string(fault_names[static_cast<std::size_t>(what)]);
    for (std::size_t v = 0; v < victims.size(); ++v)
      what_text += fmt::format("{}{}", v == 0 ? " " : ",", victims[v]);
    windows.push_back({mono_now(), 0, majority, std::move(what_text)});
    for (const auto v : victims) {
      auto& proxy = *proxies[v];
      switch (what) {
        case fault::kill:
          fleet[v].kill9();
          break;
        case fault::stop:
          fleet[v].pause();
          break;
        case fault::delay:
          proxy.set_latency(delay, delay / 4);
          break;
        case fault::client_pause:
          admin(v, {"CLIENT", "PAUSE", pause_ms, "WRITE"});
          break;
        case fault::reset:
          proxy.set_reset_peer(true);
          break;
        case fault::cut:
          proxy.set_limit_data(redlock::test::chaos_proxy::direction::upstream,
                               static_cast<std::size_t>(pick(50, 500)));
          break;
        case fault::client_kill:
          admin(v, {"CLIENT", "KILL", "TYPE", "normal"});
          break;
        case fault::stall:
          proxy.set_timeout(milliseconds(pick(100, 400)));
          break;
      }
    }
    std::this_thread::sleep_for(out / 2);
    if (what == fault::client_kill)
      for (const auto v : victims)
        admin(v, {"CLIENT", "KILL", "TYPE", "normal"});
    std::this_thread::sleep_for(out / 2);
    for (const auto v : victims) {
      switch (what) {
        case fault::kill:
          fleet[v].start();
          break;
        case fault::stop:
          fleet[v].resume();
          break;
        case fault::client_pause:
          admin(v, {"CLIENT", "UNPAUSE"});
          break;
        default:
          proxies[v]->clear();
          break;
      }
    }
    windows.back().end = mono_now();
    ++fault_counts[static_cast<std::size_t>(what)];
  }

  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0),
               "contender process failed: "
                   << (WIFEXITED(status) ? fmt::format("exit code {}", WEXITSTATUS(status))
                                         : fmt::format("signal {}", WTERMSIG(status))));
  }

  std::vector<redlock::test::event> events;
  std::uint64_t acquisitions = 0;
  std::string per_process;  // fairness across processes, for the message
  std::uint64_t increments = 0;
  std::uint64_t lost_before_write = 0;
  std::int64_t max_occupancy = 0;
  std::vector<redlock::test::mono_ns> acquired_at;
  for (std::size_t p = 0; p < processes; ++p) {
    const auto base = dir / fmt::format("p{}", p);
    std::ifstream history_file(base.string() + ".history");
    const auto some = redlock::test::history::read_lines(history_file);
    events.insert(events.end(), some.begin(), some.end());
    std::ifstream stats_file(base.string() + ".stats");
    std::uint64_t a = 0;
    std::uint64_t i = 0;
    std::int64_t o = 0;
    std::uint64_t l = 0;
    stats_file >> a >> i >> o >> l;
    acquisitions += a;
    per_process += fmt::format("{}p{} {}", p == 0 ? "" : ", ", p, a);
    increments += i;
    lost_before_write += l;
    max_occupancy = std::max(max_occupancy, o);
    redlock::test::mono_ns at = 0;
    while (stats_file >> at)
      acquired_at.push_back(at);
  }
  std::filesystem::remove_all(dir);

  // Liveness is owed only while a majority is up. A gap is excused when it meets a majority fault
  // or the time after one in which the keys of the holds it broke expire and the contenders'
  // backoff ends.
  const auto excuse = std::chrono::nanoseconds(2s).count();
  const auto excused = [&](redlock::test::mono_ns from, redlock::test::mono_ns to) {
    return std::any_of(windows.begin(), windows.end(), [&](const fault_window& w) {
      return w.majority && from < w.end + excuse && w.begin < to;
    });
  };
  const auto result = redlock::test::check_mutual_exclusion(events);
  const auto ttl_ns = std::chrono::nanoseconds(ttl).count();
  // Two measures of liveness, over the times no majority fault excuses:
  //  - between acquisitions, as the contenders saw them (reported);
  //  - free time: from the end of every hold so far (release call, loss, or validity end) to the
  //    next acquisition, when no client believed it held the lock although 32 wanted it. This one
  //    is the verdict: a holder's process starved by a loaded host lengthens the first, but its
  //    hold ends with its validity, after which the lock must be taken again within one TTL.
  std::sort(acquired_at.begin(), acquired_at.end());
  gap_report between_acquisitions;
  for (std::size_t i = 1; i < acquired_at.size(); ++i) {
    if (!excused(acquired_at[i - 1], acquired_at[i]))
      between_acquisitions.add(acquired_at[i - 1], acquired_at[i], ttl_ns);
  }
  std::vector<redlock::test::hold> holds;
  std::copy_if(result.holds.begin(), result.holds.end(), std::back_inserter(holds),
               [](const auto& h) { return !h.maybe; });
  std::sort(holds.begin(), holds.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  gap_report free_time;
  redlock::test::mono_ns busy_until = holds.empty() ? 0 : holds.front().end;
  for (const auto& h : holds) {
    if (h.begin > busy_until && !excused(busy_until, h.begin))
      free_time.add(busy_until, h.begin, ttl_ns);
    busy_until = std::max(busy_until, h.end);
  }
  // The faults around the longest free gap, with their times relative to its start.
  std::string near_gap;
  for (const auto& w : windows) {
    if (w.end + excuse > free_time.longest_from &&
        w.begin < free_time.longest_from + free_time.longest) {
      near_gap += fmt::format("; {} from {:+.0f} to {:+.0f} ms", w.what,
                              static_cast<double>(w.begin - free_time.longest_from) / 1e6,
                              static_cast<double>(w.end - free_time.longest_from) / 1e6);
    }
  }
  std::string schedule;
  for (std::size_t f = 0; f < fault_names.size(); ++f)
    schedule += fmt::format("{}{} {}", f == 0 ? "" : ", ", fault_names[f], fault_counts[f]);
  const auto majority_faults =
      std::count_if(windows.begin(), windows.end(), [](const auto& w) { return w.majority; });

  sync_client witness(witness_server.port());
  const auto counter = witness.command({"GET", options.counter_key});
  inspector audit(fleet);
  const bool no_key_left = eventually_blocking([&] { return audit.present("soak") == 0; }, 3s);
  BOOST_TEST_MESSAGE(fmt::format(
      "soak {} ms: {} faults ({} on a majority; {}), {} acquisitions ({}), {} increments, {} holds "
      "lost before writing; with a majority up: longest time free {:.0f} ms ({} over the TTL), "
      "longest between acquisitions {:.0f} ms ({} over the TTL); {}",
      options.duration.count(), windows.size(), majority_faults, schedule, acquisitions,
      per_process, increments, lost_before_write, static_cast<double>(free_time.longest) / 1e6,
      free_time.over_ttl, static_cast<double>(between_acquisitions.longest) / 1e6,
      between_acquisitions.over_ttl, result.describe()));
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(counter.text == std::to_string(increments));
  // A holder stays between its INCR and DECR of the occupancy counter also when it finds its
  // lease lost before writing (it then writes nothing, and its hold ends in the history, which the
  // checker judges above). Only such a holder may overlap the next one.
  BOOST_TEST(max_occupancy >= 1);
  BOOST_TEST(max_occupancy <= 1 + static_cast<std::int64_t>(lost_before_write),
             "occupancy " << max_occupancy << " with " << lost_before_write
                          << " holds lost before writing");
  BOOST_TEST(no_key_left);
  BOOST_TEST(acquisitions > 100u);
  // With a majority up a free lock is taken again within one TTL. Rounds skip the nodes that have
  // let a request time out (client_options::node_timeout), so rivals splitting the three votes of
  // a two-node stall part within a round trip. A free gap of a whole TTL means a key left behind,
  // contenders that stopped trying, or rounds waiting on silent nodes.
  //
  // Timing is the verdict only in an optimized build. Under the sanitizers everything runs several
  // times slower on the same 500 ms TTL, and restarting a killed node from this (sanitized,
  // multi-threaded) process stalls the proxies: gaps of several seconds follow a restart with or
  // without the library's skipping. There the gaps are reported, and safety is the verdict.
  const std::string free_gaps =
      fmt::format("{} times the lock stayed free longer than the TTL; the longest {} ms{}",
                  free_time.over_ttl, free_time.longest / 1'000'000, near_gap);
  if constexpr (sanitized_build) {
    BOOST_TEST_MESSAGE("sanitized build, liveness not judged: " << free_gaps);
  } else {
    BOOST_TEST(free_time.over_ttl == 0u, free_gaps);
  }
}

BOOST_AUTO_TEST_SUITE_END()
