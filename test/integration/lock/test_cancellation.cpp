// Ending an acquire early against real redis-server processes: per-operation cancellation at
// every stage of a round (after k grants, in the initiating turn, queued behind a local holder,
// during backoff) and destroying the client. Every operation completes exactly once, and what
// was taken on the nodes is given back. Cancelling a release or a ping that waits for stopped
// nodes completes it at once; the release still reaches them.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>

namespace {

using redlock::test::ms_between;
using redlock::test::node_range;

using redlock::test::acquire_outcome;
using redlock::test::no_keys_anywhere;
using redlock::test::record;
using redlock::test::settled_everywhere;
using redlock::test::void_outcome;
using redlock::test::warm_up;

// Emits `type` on `signal` and checks that the operation recorded in `out` completed within a
// second of it (waiting up to 3 s), with operation_aborted.
template <class Outcome>
asio::awaitable<void> cancel_and_expect_abort(asio::cancellation_signal& signal,
                                              asio::cancellation_type type, const Outcome& out) {
  const auto emitted = steady_clock::now();
  signal.emit(type);
  const bool completed =
      co_await redlock::test::eventually([&] { return out.completions > 0; }, 3000ms);
  BOOST_TEST(completed);
  BOOST_TEST_MESSAGE("completed " << ms_between(emitted, out.at) << " ms after the cancellation");
  BOOST_TEST(ms_between(emitted, out.at) < 1000);
  BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cancellation)

BOOST_FIXTURE_TEST_CASE(cancel_acquire_after_k_grants, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // Paused nodes must not time out before the cancellation does.
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(2000ms));
    co_await warm_up(locks);

    struct variant {
      std::size_t grants;
      asio::cancellation_type type;
      const char* type_name;
    };
    const variant variants[] = {{0, asio::cancellation_type::terminal, "terminal"},
                                {1, asio::cancellation_type::terminal, "terminal"},
                                {2, asio::cancellation_type::terminal, "terminal"},
                                {2, asio::cancellation_type::partial, "partial"}};
    int round = 0;
    for (const auto& v : variants) {
      const std::string resource = fmt::format("cancel:{}", round++);
      BOOST_TEST_CONTEXT("grants " << v.grants << ", " << v.type_name << " cancellation") {
        for (std::size_t i = v.grants; i < 5; ++i) {
          fleet[i].pause();
        }
        asio::cancellation_signal signal;
        acquire_outcome out;
        locks.async_acquire(resource, lock_for(30000ms),
                            asio::bind_cancellation_slot(signal.slot(), record(out)));
        const auto granting = node_range(0, v.grants);
        if (v.grants > 0) {
          const bool seen = co_await eventually(
              [&] { return nodes.present_on(granting, resource) == v.grants; }, 3000ms);
          BOOST_TEST(seen);
        } else {
          co_await sleep_for(50ms);
        }
        BOOST_TEST(out.completions == 0);

        co_await cancel_and_expect_abort(signal, v.type, out);
        BOOST_TEST(!out.lease.held());

        for (std::size_t i = v.grants; i < 5; ++i) {
          fleet[i].resume();
        }
        // The stopped nodes now run the SET they had buffered, and then the release queued behind
        // it on the same connection.
        const auto resumed = steady_clock::now();
        const bool cleaned = co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
        BOOST_TEST(cleaned, nodes.total_keys() << " keys left");
        BOOST_TEST_MESSAGE("clean " << ms_since(resumed) << " ms after resuming");
        co_await sleep_for(200ms);
        BOOST_TEST(nodes.total_keys() == 0);
        BOOST_TEST(out.completions == 1);
      }
    }
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_in_the_initiating_turn, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    co_await warm_up(locks);
    for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
      asio::cancellation_signal signal;
      acquire_outcome out;
      locks.async_acquire("instant", lock_for(30000ms),
                          asio::bind_cancellation_slot(signal.slot(), record(out)));
      signal.emit(type);
      const bool completed = co_await eventually([&] { return out.completions > 0; }, 2000ms);
      BOOST_TEST(completed);
      BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
      BOOST_TEST(!out.lease.held());
      const bool cleaned = co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
      BOOST_TEST(cleaned);
      co_await sleep_for(200ms);
      BOOST_TEST(nodes.total_keys() == 0);
      BOOST_TEST(out.completions == 1);
    }
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_while_queued_behind_a_local_holder, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(30000ms);
    auto [ec, holder] = co_await locks.async_acquire("queued", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "queued", holder.token()));

    asio::cancellation_signal signal;
    acquire_outcome out;
    locks.async_acquire("queued", options,
                        asio::bind_cancellation_slot(signal.slot(), record(out)));
    co_await sleep_for(50ms);
    BOOST_TEST(out.completions == 0);
    signal.emit(asio::cancellation_type::total);
    const bool completed = co_await eventually([&] { return out.completions > 0; }, 1000ms);
    BOOST_TEST(completed);
    BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
    BOOST_TEST(!out.lease.held());
    BOOST_TEST(nodes.holding("queued", holder.token()) == 5u);

    // The cancelled waiter must not take the lock when the holder lets go.
    auto [release_ec] = co_await holder.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    co_await sleep_for(200ms);
    BOOST_TEST(nodes.total_keys() == 0);
    BOOST_TEST(out.completions == 1);

    // The queue is usable afterwards.
    auto [again_ec, again] = co_await locks.async_try_acquire("queued", options, tuple_awaitable);
    BOOST_TEST(!again_ec, again_ec.message());
    std::tie(release_ec) = co_await again.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await no_keys_anywhere(nodes));
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_during_backoff, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client owner(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, held] = co_await owner.async_acquire("busy", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "busy", held.token()));

    // Long pauses between short rounds: the waiter spends nearly all its time backing off.
    auto options = lock_for(30000ms);
    options.retry = {300ms, 300ms, 1.0};
    asio::cancellation_signal signal;
    acquire_outcome out;
    waiter.async_acquire("busy", options, asio::bind_cancellation_slot(signal.slot(), record(out)));
    co_await sleep_for(100ms);
    BOOST_TEST(out.completions == 0);

    // Total cancellation is only honoured between rounds; one that lands in a round is ignored by
    // contract, so it is repeated until it lands in a pause.
    const auto emitted = steady_clock::now();
    int emissions = 0;
    while (out.completions == 0 && emissions < 100) {
      signal.emit(asio::cancellation_type::total);
      ++emissions;
      co_await sleep_for(20ms);
    }
    BOOST_TEST(out.completions == 1);
    BOOST_TEST(ms_since(emitted) < 2000);
    BOOST_TEST_MESSAGE("completed after " << emissions << " emission(s)");
    BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
    BOOST_TEST(!out.lease.held());
    BOOST_TEST(nodes.holding("busy", held.token()) == 5u);

    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    co_await sleep_for(700ms);  // longer than a backoff pause: a still-running waiter would show
    BOOST_TEST(nodes.total_keys() == 0);
    BOOST_TEST(out.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(destroying_the_client_aborts_what_is_in_flight, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client owner(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, foreign] = co_await owner.async_acquire("taken", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "taken", foreign.token()));

    auto doomed = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                                    fast_client_options());
    auto [mine_ec, mine] =
        co_await doomed->async_acquire("mine", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!mine_ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "mine", mine.token()));
    void_outcome lost;
    mine.async_wait_lost(record(lost));
    // One waiter contends over the network, the other queues behind it locally.
    acquire_outcome first;
    acquire_outcome second;
    doomed->async_acquire("taken", lock_for(30000ms), record(first));
    doomed->async_acquire("taken", lock_for(30000ms), record(second));
    co_await sleep_for(100ms);
    BOOST_TEST(first.completions + second.completions + lost.completions == 0);

    doomed.reset();
    const bool completed = co_await eventually(
        [&] { return first.completions > 0 && second.completions > 0 && lost.completions > 0; },
        2000ms);
    BOOST_TEST_REQUIRE(completed);
    BOOST_TEST(first.ec == asio::error::operation_aborted, first.ec.message());
    BOOST_TEST(second.ec == asio::error::operation_aborted, second.ec.message());
    BOOST_TEST(lost.ec == asio::error::operation_aborted, lost.ec.message());
    BOOST_TEST(!first.lease.held());
    BOOST_TEST(!second.lease.held());
    BOOST_TEST(!mine.held());

    const bool released = co_await eventually([&] { return nodes.present("mine") == 0; }, 1500ms);
    BOOST_TEST(released, nodes.present("mine") << " nodes still hold the released lease's key");
    BOOST_TEST(nodes.holding("taken", foreign.token()) == 5u);

    // The orphaned lease still answers, once, without touching freed state.
    auto [late_ec] = co_await mine.async_release(tuple_awaitable);
    BOOST_TEST((late_ec == asio::error::operation_aborted || late_ec == error::not_held),
               late_ec.message());
    co_await sleep_for(100ms);
    BOOST_TEST(first.completions == 1);
    BOOST_TEST(second.completions == 1);
    BOOST_TEST(lost.completions == 1);

    auto [release_ec] = co_await foreign.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await no_keys_anywhere(nodes));
  });
}

// cancellation-and-shutdown.md, "Cancellation", row async_release: a cancelled release completes
// at once with operation_aborted, whatever the cancellation type, and the release still goes out
// to every node. Three of five nodes are stopped, so the release cannot be decided before their
// deadline; once they run again they delete the key, except the one where another owner holds it.
BOOST_FIXTURE_TEST_CASE(cancel_release_completes_at_once_and_still_reaches_every_node,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // The stopped nodes' deadline lies far beyond the cancellation and their resumption.
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(5000ms));
    co_await warm_up(locks);

    const auto answering = node_range(0, 2);
    const auto stopped = node_range(2, 5);
    const std::size_t taken_by_another_owner = 4;  // one of the stopped nodes
    const auto ours = node_range(0, 4);

    struct variant {
      asio::cancellation_type type;
      const char* type_name;
    };
    const variant variants[] = {{asio::cancellation_type::terminal, "terminal"},
                                {asio::cancellation_type::partial, "partial"},
                                {asio::cancellation_type::total, "total"}};
    for (const auto& v : variants) {
      const std::string resource = fmt::format("cancelled-release:{}", v.type_name);
      BOOST_TEST_CONTEXT(v.type_name << " cancellation") {
        auto [ec, lease] = co_await locks.async_try_acquire(
            resource, lock_for(30000ms, redlock::test::renewal::off), tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
        BOOST_TEST_REQUIRE(co_await settled_everywhere(nodes, resource, lease.token()));
        // The key expired there and someone else took it: the release must leave it alone.
        nodes.set(taken_by_another_owner, resource, "another-owner", 30000ms);
        for (const auto i : stopped) {
          fleet[i].pause();
        }

        asio::cancellation_signal signal;
        void_outcome out;
        lease.async_release(asio::bind_cancellation_slot(signal.slot(), record(out)));
        co_await sleep_for(100ms);
        // Two answers are no quorum, and the stopped nodes have 5 s left to answer.
        BOOST_TEST_REQUIRE(out.completions == 0);

        co_await cancel_and_expect_abort(signal, v.type, out);
        BOOST_TEST(!lease.held());
        const bool gone_where_answered =
            co_await eventually([&] { return nodes.present_on(answering, resource) == 0; }, 3000ms);
        BOOST_TEST(gone_where_answered);

        for (const auto i : stopped) {
          fleet[i].resume();
        }
        // The key lives 30 s: gone within seconds means the release reached the node.
        const auto resumed = steady_clock::now();
        const bool reached_every_node =
            co_await eventually([&] { return nodes.present_on(ours, resource) == 0; }, 3000ms);
        BOOST_TEST(reached_every_node, nodes.present_on(ours, resource)
                                           << " of our nodes still hold the key");
        BOOST_TEST_MESSAGE("released everywhere " << ms_since(resumed) << " ms after resuming");
        BOOST_TEST(nodes.holding_on({taken_by_another_owner}, resource, "another-owner") == 1u);
        co_await sleep_for(100ms);
        BOOST_TEST(out.completions == 1);
      }
    }
  });
}

// cancellation-and-shutdown.md, "Cancellation", row async_ping: a cancelled ping completes at once
// with operation_aborted, whatever the cancellation type, while three of five nodes are stopped
// and no quorum can answer before their deadline. The client pings normally once they are back.
BOOST_FIXTURE_TEST_CASE(cancel_ping_completes_at_once, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // The stopped nodes' deadline lies far beyond every ping below.
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(5000ms));
    co_await warm_up(locks);
    const auto stopped = node_range(2, 5);
    for (const auto i : stopped) {
      fleet[i].pause();
    }

    struct variant {
      asio::cancellation_type type;
      const char* type_name;
    };
    const variant variants[] = {{asio::cancellation_type::terminal, "terminal"},
                                {asio::cancellation_type::partial, "partial"},
                                {asio::cancellation_type::total, "total"}};
    for (const auto& v : variants) {
      BOOST_TEST_CONTEXT(v.type_name << " cancellation") {
        asio::cancellation_signal signal;
        void_outcome out;
        locks.async_ping(asio::bind_cancellation_slot(signal.slot(), record(out)));
        co_await sleep_for(100ms);
        BOOST_TEST_REQUIRE(out.completions == 0);  // two answers are no quorum

        co_await cancel_and_expect_abort(signal, v.type, out);
        co_await sleep_for(50ms);
        BOOST_TEST(out.completions == 1);
      }
    }

    for (const auto i : stopped) {
      fleet[i].resume();
    }
    const auto ec = co_await redlock::test::ping_until_answered(locks);
    BOOST_TEST(!ec, ec.message());
  });
}

BOOST_AUTO_TEST_SUITE_END()
