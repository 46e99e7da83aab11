// The public API called the way a new user writes it, against real redis-server processes: a
// client constructed with co_await in its argument list (which g++ 12 once turned into a
// use-after-free of the default options), and every async_ function called without a completion
// token, which returns a deferred operation to co_await or to launch with a token later.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using redlock::test::gone_everywhere;

// client_options::release_channel as the library defaults it.
const std::string default_channel = "redlock:released";

bool subscribed_on_every_node(redis_fleet& fleet) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    const auto reply = c.command({"PUBSUB", "NUMSUB", default_channel});
    if (reply.elements.size() != 2 || reply.elements[1].integer != 1) return false;
  }
  return true;
}

// `name`, after a trip through the executor: something a user might co_await to get a name.
asio::awaitable<std::string> looked_up(std::string name) {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return name;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(user_code)

// A client constructed inside a coroutine with co_await in its argument list and the options left
// out, then made to wait for a lock held elsewhere: the waiting acquire subscribes to release
// announcements on the default channel, which reads the client's options. Under g++ 12 a default
// argument `client_options options = {}` was destroyed twice by such a statement, so the client
// read a freed channel name here (AddressSanitizer: heap-use-after-free; without it the waiter
// subscribed to a garbled channel, or the process crashed).
BOOST_FIXTURE_TEST_CASE(client_made_with_co_await_in_its_arguments_waits_for_a_release,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const std::vector<redlock::node_config> configs = fleet.configs();
    redlock::client holder(io.get_executor(), configs);
    redlock::client waiter(co_await asio::this_coro::executor, configs);

    redlock::lease held =
        co_await holder.async_acquire("user:wait", lock_for(10s), asio::use_awaitable);
    // Rounds seconds apart: only the release announcement can wake it soon after the release.
    auto patient = lock_for(10s);
    patient.retry = {5s, 5s, 1.0};
    patient.wait = 20s;
    std::optional<error_code> outcome;
    redlock::lease got;
    waiter.async_acquire("user:wait", patient, [&](error_code ec, redlock::lease acquired) {
      outcome = ec;
      got = std::move(acquired);
    });
    BOOST_TEST_REQUIRE(co_await eventually([&] { return subscribed_on_every_node(fleet); }, 3s),
                       "the waiting client subscribes to " << default_channel << " on every node");
    BOOST_TEST_REQUIRE(!outcome.has_value());

    const auto released = steady_clock::now();
    co_await held.async_release(asio::use_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return outcome.has_value(); }, 4s),
                       "the announcement wakes the waiter long before its next round");
    BOOST_TEST(!*outcome, got.diagnostics());
    BOOST_TEST(got.held());
    BOOST_TEST(ms_since(released) < 2000);
    co_await got.async_release(asio::use_awaitable);
    BOOST_TEST(co_await gone_everywhere(nodes, "user:wait"));
  });
}

// Every async_ function called without a token returns a deferred operation: nothing is sent
// until it is launched, by co_await or by calling it with a token. The mutex and the semaphore are
// constructed with co_await in their argument lists and their options left out, as the client is.
BOOST_FIXTURE_TEST_CASE(async_functions_without_a_token_return_deferred_operations,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const std::vector<redlock::node_config> configs = fleet.configs();
    redlock::client locks(io.get_executor(), configs);

    // client::async_ping
    co_await locks.async_ping();

    // client::async_try_acquire: launched later with a token of the caller's choice.
    auto try_acquire = locks.async_try_acquire("user:try", lock_for(5s));
    BOOST_TEST(nodes.present("user:try") == 0u);
    auto [try_ec, tried] = co_await std::move(try_acquire)(tuple_awaitable);
    BOOST_TEST_REQUIRE(!try_ec, tried.diagnostics());
    BOOST_TEST(nodes.holding("user:try", tried.token()) >= 3u);

    // lease::async_extend, lease::async_release
    co_await tried.async_extend(8s);
    BOOST_TEST(tried.held());
    co_await tried.async_release();
    BOOST_TEST(co_await gone_everywhere(nodes, "user:try"));

    // client::async_acquire, lease::async_wait_lost (launched with a callback)
    redlock::lease held = co_await locks.async_acquire("user:acquire", lock_for(5s));
    BOOST_TEST_REQUIRE(held.held());
    std::optional<error_code> lost;
    auto wait_lost = held.async_wait_lost();
    std::move(wait_lost)([&](error_code ec) { lost = ec; });
    co_await held.async_release();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return lost.has_value(); }, 2s));
    BOOST_TEST(*lost == asio::error::operation_aborted);

    // mutex::async_lock, async_try_lock, async_unlock
    redlock::mutex first(locks, co_await looked_up("user:mutex"));
    redlock::mutex second(locks, co_await looked_up("user:mutex"));
    auto lock = first.async_lock();
    BOOST_TEST(nodes.present("user:mutex") == 0u);
    co_await std::move(lock);
    BOOST_TEST(first.owns_lock());
    auto [try_lock_ec, locked] = co_await second.async_try_lock()(tuple_awaitable);
    BOOST_TEST(!try_lock_ec);
    BOOST_TEST(!locked);
    co_await first.async_unlock();
    BOOST_TEST(!first.owns_lock());
    BOOST_TEST(co_await gone_everywhere(nodes, "user:mutex"));

    // semaphore::async_acquire, async_try_acquire
    redlock::semaphore permits(locks, co_await looked_up("user:permits"), 1);
    redlock::lease permit = co_await permits.async_acquire();
    BOOST_TEST_REQUIRE(permit.held());
    auto [full_ec, none] = co_await permits.async_try_acquire()(tuple_awaitable);
    BOOST_TEST(full_ec == error::contended);
    BOOST_TEST(!none.held());
    co_await permit.async_release();

    // client::async_shutdown (launched with a callback)
    std::optional<error_code> shut;
    locks.async_shutdown()([&](error_code ec) { shut = ec; });
    BOOST_TEST_REQUIRE(co_await eventually([&] { return shut.has_value(); }, 5s));
    BOOST_TEST(!*shut);
  });
}

BOOST_AUTO_TEST_SUITE_END()
