// An extension whose reply is late may still have run on the nodes: the validity a lease claims
// must drop to what the extension gives the key as soon as it is sent, and only a quorum that
// confirms it in time may raise it again. Renewal never sends less than the validity claimed, and
// a user's extension reschedules it. Judged by the mutual-exclusion checker over what the clients
// saw, with the unsafe variant (a holder that keeps its old validity) shown to be caught.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>

namespace {

using redlock::test::chaos_proxy;
using redlock::test::lock_recorder;
using redlock::test::mono_now;
using redlock::test::ms_between;
using redlock::test::op_result;
using redlock::test::plain_lock;
using redlock::test::proxied_fleet;
using redlock::test::to_mono_ns;

redlock::lock_options renewed_lock(milliseconds ttl) {
  redlock::lock_options options;
  options.ttl = ttl;
  options.auto_renew = true;
  return options;
}

redlock::test::check_result check(const redlock::test::history& log) {
  const auto result = redlock::test::check_mutual_exclusion(log.events());
  BOOST_TEST_MESSAGE(result.describe());
  return result;
}

// Records the loss of `held` in the history when it is signalled.
void record_loss(asio::io_context& io, redlock::lease& held, lock_recorder& who, int& losses) {
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const std::string token = held.token();
        auto [ec] = co_await held.async_wait_lost(tuple_awaitable);
        if (ec == error::lock_lost) {
          ++losses;
          who.record_lost(token);
        }
      },
      asio::detached);
}

// A rival that acquires as soon as it can, directly on the servers, holds briefly and releases.
asio::awaitable<void> rival_takes_the_lock(redlock::client& locks, lock_recorder& rival,
                                           milliseconds wait) {
  redlock::lock_options options = plain_lock(5s);
  options.wait = wait;
  options.retry = {5ms, 20ms, 2.0};
  auto lease = co_await rival.acquire(locks, options);
  BOOST_TEST_REQUIRE(!rival.last_error(), lease.diagnostics());
  co_await sleep_for(50ms);  // both "work" now, if both believe they hold
  BOOST_TEST(!co_await rival.release(lease));
}

// The cast of these scenarios: holder "a", whose nodes are behind chaos proxies and who counts a
// node as failed after 200 ms, and rival "b", who reaches the servers directly. Runs
// `scenario(io, nodes, servers, a_locks, a, b_locks, b)` on a fresh fleet and returns the
// checker's verdict over what both saw.
template <class Scenario>
redlock::test::check_result holder_and_rival(Scenario scenario) {
  proxied_fleet nodes;
  inspector servers(nodes.fleet);
  redlock::test::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client a_locks(io.get_executor(), nodes.configs(), fast_client_options(200ms));
    redlock::client b_locks(io.get_executor(), nodes.fleet.configs(), fast_client_options());
    lock_recorder a(log, "a", "r");
    lock_recorder b(log, "b", "r");
    co_await scenario(io, nodes, servers, a_locks, a, b_locks, b);
  });
  return check(log);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(extension_validity)

// A 30 s lock is shortened to 1.5 s, and the replies come back after node_timeout: the extension
// fails with no_quorum, but it ran on every node. The key is gone after 1.5 s and a rival takes
// the lock. A holder that kept the 30 s it had overlaps the rival (the checker catches it); the
// library's lease says it is valid for at most the 1.5 s it asked for, and is not held after.
BOOST_AUTO_TEST_CASE(late_replies_to_a_shortening_extend) {
  for (const bool unsafe : {true, false}) {
    BOOST_TEST_CONTEXT((unsafe ? "holder keeps its old validity" : "library")) {
      const auto result = holder_and_rival([unsafe](asio::io_context&, proxied_fleet& nodes,
                                                    inspector& servers, redlock::client& a_locks,
                                                    lock_recorder& a, redlock::client& b_locks,
                                                    lock_recorder& b) -> asio::awaitable<void> {
        auto a_lease = co_await a.try_acquire(a_locks, plain_lock(30s));
        BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
        const auto validity_before = a_lease.valid_until();
        for (auto& proxy : nodes.proxies)
          proxy->set_latency(chaos_proxy::direction::downstream, 400ms);

        const auto invoke = mono_now();
        const auto sent = steady_clock::now();
        auto [ec] = co_await a_lease.async_extend(1500ms, tuple_awaitable);
        BOOST_TEST(ec == error::no_quorum, ec.message());
        if (unsafe) {
          a.record_extended(a_lease.token(), invoke, op_result::failed,
                            to_mono_ns(validity_before));
        } else {
          a.record_extended(a_lease.token(), invoke, op_result::failed,
                            to_mono_ns(a_lease.valid_until()));
          BOOST_TEST((a_lease.valid_until() <= sent + 1500ms));
          BOOST_TEST(a_lease.held());  // still valid for what it asked
        }
        // The extensions ran: every node now holds the key for 1.5 s at most.
        BOOST_TEST(co_await eventually(
            [&] {
              for (std::size_t i = 0; i < 5; ++i)
                if (servers.pttl(i, "r") > 1500) return false;
              return true;
            },
            2s));
        nodes.clear_toxics();

        co_await rival_takes_the_lock(b_locks, b, 5s);
        if (!unsafe) {
          BOOST_TEST(!a_lease.held(), "still held "
                                          << ms_between(steady_clock::now(), a_lease.valid_until())
                                          << " ms after the key expired");
        }
        co_await a.release(a_lease);
      });
      BOOST_TEST(result.ok() == !unsafe, result.describe());
    }
  }
}

// A 1 s lease extended by its user to 4 s: renewal is due half a TTL before those 4 s end (not at
// half of the lease's own TTL), and sends enough to keep them. Then every reply is late and the
// holder is cut off: renewal cannot confirm, and the loss is signalled when the 4 s are over. The
// keys stay for those 4 s as well, so the rival gets the lock only after them: no overlap.
// (Before, renewal sent PEXPIRE 1000 at 0.5 s: the keys expired at 1.5 s while the lease said
// 4 s.)
BOOST_AUTO_TEST_CASE(late_replies_to_a_renewal_after_a_long_user_extend) {
  const auto result = holder_and_rival(
      [](asio::io_context& io, proxied_fleet& nodes, inspector& servers, redlock::client& a_locks,
         lock_recorder& a, redlock::client& b_locks, lock_recorder& b) -> asio::awaitable<void> {
        int losses = 0;
        auto a_lease = co_await a.try_acquire(a_locks, renewed_lock(1s));
        BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
        record_loss(io, a_lease, a, losses);
        BOOST_TEST_REQUIRE(!co_await a.extend(a_lease, 4s));
        const auto claimed = a_lease.valid_until();

        // Replies late from now on; then the holder is cut off altogether.
        for (auto& proxy : nodes.proxies)
          proxy->set_latency(chaos_proxy::direction::downstream, 400ms);
        co_await sleep_for(700ms);
        for (auto& proxy : nodes.proxies)
          proxy->set_blackhole(true);
        // Whatever renewal sent, no majority lets the key go before the validity the lease
        // claimed (a claim rests on a quorum: a node whose extension answered late may hold less).
        // The time left is read after the PTTL, so a stall between the two only makes the test
        // stricter; 1 ms is PTTL's rounding.
        std::size_t keeping = 0;
        std::string seen;
        for (std::size_t i = 0; i < 5; ++i) {
          const auto pttl = servers.pttl(i, "r");
          const auto left = ms_between(steady_clock::now(), claimed);
          if (pttl >= left - 1) ++keeping;
          seen += fmt::format(" node {}: PTTL {} ms, {} ms claimed;", i, pttl, left);
        }
        BOOST_TEST(keeping >= 3u, seen);

        co_await rival_takes_the_lock(b_locks, b, 8s);
        BOOST_TEST(losses == 1);
        BOOST_TEST(!a_lease.held());
        nodes.clear_toxics();
      });
  BOOST_TEST(result.ok(), result.describe());
}

// A user extension shorter than the lease's TTL moves the next renewal before its end, and
// renewal then keeps the lease with its own TTL: it is never lost. (Before, renewal stayed planned
// at half of the original TTL, after the shorter validity had run out: lost at 0.2 s.)
BOOST_FIXTURE_TEST_CASE(a_short_user_extend_then_renewal_keeps_the_lease,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] = co_await locks.async_try_acquire("r", renewed_lock(1s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    int losses = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [lost] = co_await lease.async_wait_lost(tuple_awaitable);
          if (lost == error::lock_lost) ++losses;
        },
        asio::detached);

    std::tie(ec) = co_await lease.async_extend(200ms, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    co_await sleep_for(3s);
    BOOST_TEST(losses == 0, lease.diagnostics());
    BOOST_TEST(lease.held(), lease.diagnostics());
    BOOST_TEST(nodes.holding("r", lease.token()) == 5u);
    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
  });
}

// After a user extension longer than the TTL, renewal neither shortens the validity the lease
// claims (before, the first renewal sent the 600 ms TTL and the 2.5 s became 0.6 s) nor lets any
// node's key run out before it.
BOOST_FIXTURE_TEST_CASE(renewal_never_shortens_a_long_user_extend, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] = co_await locks.async_try_acquire("r", renewed_lock(600ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    std::tie(ec) = co_await lease.async_extend(2500ms, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    const auto extended_to = lease.valid_until();
    const auto until = steady_clock::now() + 4s;  // well past the first renewals
    while (steady_clock::now() < until) {
      const auto claimed = lease.valid_until();
      BOOST_TEST((claimed >= extended_to), "the validity given by async_extend was shortened by "
                                               << ms_between(claimed, extended_to) << " ms");
      // A majority keeps the key as long as claimed (see above: a node whose extension answered
      // late, past node_timeout on a loaded host, may hold less, and the claim does not rest on
      // it). Read after the PTTL: a stall between the two cannot fail the test.
      std::size_t keeping = 0;
      std::string seen;
      for (std::size_t i = 0; i < 5; ++i) {
        const auto pttl = nodes.pttl(i, "r");
        const auto left = ms_between(steady_clock::now(), claimed);
        if (pttl >= left - 1) ++keeping;
        seen += fmt::format(" node {}: PTTL {} ms, {} ms claimed;", i, pttl, left);
      }
      BOOST_TEST(keeping >= 3u, seen);
      co_await sleep_for(100ms);
    }
    BOOST_TEST(lease.held(), lease.diagnostics());
    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
  });
}

BOOST_AUTO_TEST_SUITE_END()
