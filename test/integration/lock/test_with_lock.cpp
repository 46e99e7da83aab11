// with_lock against real redis-server processes: the body's value and exception come out and the
// lock is released either way; a lost lock cancels the body.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

using redlock::test::gone_everywhere;

}  // namespace

BOOST_AUTO_TEST_SUITE(with_lock_scope)

BOOST_FIXTURE_TEST_CASE(with_lock_returns_the_body_value_and_releases, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    std::size_t holding_inside = 0;
    const int value = co_await redlock::with_lock(
        locks, "scoped", lock_for(5000ms), [&](redlock::lease& lease) -> asio::awaitable<int> {
          holding_inside = nodes.holding("scoped", lease.token());
          co_await sleep_for(10ms);
          co_return 42;
        });
    BOOST_TEST(value == 42);
    BOOST_TEST(holding_inside >= 3u);
    BOOST_TEST(co_await gone_everywhere(nodes, "scoped"));
  });
}

BOOST_FIXTURE_TEST_CASE(with_lock_propagates_the_body_exception_and_releases,
                        redlock::test::five_nodes) {
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        std::size_t holding_inside = 0;
        std::string caught;
        try {
          co_await redlock::with_lock(locks, "throwing", lock_for(5000ms),
                                      [&](redlock::lease& lease) -> asio::awaitable<void> {
                                        holding_inside = nodes.holding("throwing", lease.token());
                                        co_await sleep_for(10ms);
                                        throw std::logic_error("boom");
                                      });
        } catch (const std::logic_error& e) {
          caught = e.what();
        }
        BOOST_TEST(caught == "boom");
        BOOST_TEST(holding_inside >= 3u);
        BOOST_TEST(co_await gone_everywhere(nodes, "throwing"));
      },
      20s);  // a with_lock that waits for the lease instead of the body would hang
}

BOOST_AUTO_TEST_CASE(with_lock_cancels_the_body_when_the_lock_is_lost) {
  redis_fleet fleet(5);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    bool started = false;
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await eventually([&] { return started; }, 10000ms);
          co_await sleep_for(100ms);
          fleet[0].kill9();
          fleet[1].kill9();
          fleet[2].kill9();
        },
        asio::detached);

    const auto start = steady_clock::now();
    error_code thrown;
    try {
      co_await redlock::with_lock(locks, "doomed", lock_for(600ms),
                                  [&](redlock::lease&) -> asio::awaitable<void> {
                                    started = true;
                                    co_await sleep_for(10s);
                                    finished = true;
                                  });
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
    const auto took = ms_since(start);
    BOOST_TEST(started);
    BOOST_TEST(!finished);
    BOOST_TEST(thrown == error::lock_lost, thrown.message());
    BOOST_TEST(took < 5000, "with_lock took " << took << " ms");
  });
}

BOOST_AUTO_TEST_SUITE_END()
