// A lock handed over by its token: lease::detach leaves the key on the nodes, and
// client::async_extend / async_release by token (another process, or an operator's script) keep
// and end it, never touching a key that holds another token.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>

BOOST_AUTO_TEST_SUITE(by_token)

BOOST_AUTO_TEST_CASE(a_detached_lock_is_kept_and_ended_by_its_token_elsewhere) {
  redis_fleet fleet(3);
  inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::string token;
    {
      redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
      auto [ec, lease] = co_await first.async_acquire("handed", lock_for(2s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      token = lease.token();
      // The acquire completed on two grants. The third SET may not be written yet (its link still
      // in its handshake), and a client destroyed before it writes it never sends it: wait for
      // it, so that the key is on every node when the client goes.
      BOOST_TEST_REQUIRE(co_await redlock::test::settled_everywhere(nodes, "handed", token));
      std::optional<error_code> lost;
      lease.async_wait_lost([&](error_code e) { lost = e; });
      lease.detach();
      BOOST_TEST(!lease.held());
      const bool told = co_await eventually([&] { return lost.has_value(); }, 1000ms);
      BOOST_TEST_REQUIRE(told);
      BOOST_TEST(*lost == asio::error::operation_aborted);
      // Neither the lease nor the client going away releases it.
    }
    co_await sleep_for(100ms);
    BOOST_TEST(nodes.holding("handed", token) == 3u);

    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    auto [extended] = co_await second.async_extend("handed", token, 10s, tuple_awaitable);
    BOOST_TEST(!extended, extended.message());
    // It completes on a quorum's answers; the third node's may land a moment later.
    const bool extended_everywhere = co_await eventually([&] {
      for (std::size_t node = 0; node < 3; ++node) {
        if (nodes.pttl(node, "handed") <= 2000) return false;
      }
      return true;
    });
    BOOST_TEST(extended_everywhere);

    // Someone else's token changes nothing.
    auto [foreign] = co_await second.async_extend("handed", "not-the-token", 1s, tuple_awaitable);
    BOOST_TEST(foreign == error::not_held, foreign.message());
    auto [foreign_release] =
        co_await second.async_release("handed", "not-the-token", tuple_awaitable);
    BOOST_TEST(foreign_release == error::not_held, foreign_release.message());
    BOOST_TEST(nodes.holding("handed", token) == 3u);

    // A waiter of the second client is woken by the release by token (announced).
    std::optional<error_code> waited;
    redlock::lease next;
    second.async_acquire("handed", lock_for(5s), [&](error_code e, redlock::lease l) {
      waited = e;
      next = std::move(l);
    });
    co_await sleep_for(50ms);
    BOOST_TEST(!waited.has_value());
    const auto released_at = steady_clock::now();
    auto [released] = co_await second.async_release("handed", token, tuple_awaitable);
    BOOST_TEST(!released, released.message());
    const bool got = co_await eventually([&] { return waited.has_value(); }, 3000ms);
    BOOST_TEST_REQUIRE(got);
    BOOST_TEST(!*waited, waited->message());
    BOOST_TEST(ms_since(released_at) < 1500, "woken by the announcement, not the 10 s TTL");
    BOOST_TEST(next.token() != token);
    co_await next.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(bad_arguments_and_a_gone_lock) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [no_token] = co_await locks.async_release("r", "", tuple_awaitable);
    BOOST_TEST(no_token == error::invalid_argument);
    auto [no_name] = co_await locks.async_extend("", "t", 1s, tuple_awaitable);
    BOOST_TEST(no_name == error::invalid_argument);
    auto [too_short] = co_await locks.async_extend("r", "t", 1ms, tuple_awaitable);
    BOOST_TEST(too_short == error::invalid_argument);
    auto [gone] = co_await locks.async_extend("never-taken", "t", 1s, tuple_awaitable);
    BOOST_TEST(gone == error::not_held, gone.message());
    auto [gone_release] = co_await locks.async_release("never-taken", "t", tuple_awaitable);
    BOOST_TEST(gone_release == error::not_held, gone_release.message());
  });
}

BOOST_AUTO_TEST_SUITE_END()
