// Operations ended while their replies are still on the way: an acquire cancelled (terminal or
// partial) or its client destroyed after 0 to 5 replies, and a lease destroyed with an extension
// or release in flight. Each completes exactly once, and nothing of its own is left on any node.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace {

using redlock::test::ms_between;

using redlock::test::plain_lock;
using redlock::test::proxied_fleet;

// How an operation in flight is ended in scenario 8.
enum class how_it_ends { cancel_terminal, cancel_partial, destroy_client };
constexpr std::array<how_it_ends, 3> endings = {
    how_it_ends::cancel_terminal, how_it_ends::cancel_partial, how_it_ends::destroy_client};
constexpr std::string_view name_of(how_it_ends e) {
  switch (e) {
    case how_it_ends::cancel_terminal:
      return "terminal cancellation";
    case how_it_ends::cancel_partial:
      return "partial cancellation";
    case how_it_ends::destroy_client:
      return "client destroyed";
  }
  return "?";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(interrupted_operations)

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
        for (const how_it_ends how : endings) {
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
                case how_it_ends::cancel_terminal:
                  signal.emit(asio::cancellation_type::terminal);
                  break;
                case how_it_ends::cancel_partial:
                  signal.emit(asio::cancellation_type::partial);
                  break;
                case how_it_ends::destroy_client:
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

BOOST_AUTO_TEST_SUITE_END()
