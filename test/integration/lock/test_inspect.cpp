// client::async_inspect and semaphore::async_inspect against real redis-server processes: what each
// node holds under the key and for how long, and the verdict, also with nodes down, keys of rival
// rounds, and a key that is not a lock's.

#include "integration/prelude.hpp"
#include "redlock/inspection.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace {

using verdict = redlock::inspection::verdict;

}  // namespace

BOOST_AUTO_TEST_SUITE(inspect)

BOOST_AUTO_TEST_CASE(a_free_lock_then_a_held_one_then_a_released_one) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [free_ec, free] = co_await locks.async_inspect("looked-at", tuple_awaitable);
    BOOST_TEST(!free_ec, free_ec.message() << ": " << free.diagnostics);
    BOOST_TEST((free.state == verdict::free));
    BOOST_TEST(free.resource == "looked-at");
    BOOST_TEST(free.quorum == 2u);
    BOOST_TEST_REQUIRE(free.nodes.size() == 3u);
    for (std::size_t node = 0; node < 3; ++node) {
      BOOST_TEST(free.nodes[node].address == fleet.configs()[node].address());
      BOOST_TEST(free.nodes[node].answered());
      BOOST_TEST(!free.nodes[node].holder.has_value());
    }

    auto [ec, lease] = co_await locks.async_acquire("looked-at", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    auto [held_ec, held] = co_await locks.async_inspect("looked-at", tuple_awaitable);
    BOOST_TEST(!held_ec, held_ec.message());
    BOOST_TEST((held.state == verdict::held));
    BOOST_TEST(held.held_by(lease.token()));
    BOOST_TEST(held.nodes_holding(lease.token()) == 3u);
    BOOST_TEST_REQUIRE(held.held_for.has_value());
    BOOST_TEST(held.held_for->count() > 0);
    BOOST_TEST(held.held_for->count() <= 5000);
    for (const auto& node : held.nodes) {
      BOOST_TEST(*node.holder == lease.token());
      BOOST_TEST_REQUIRE(node.ttl.has_value());
      BOOST_TEST(node.ttl->count() <= 5000);
    }

    co_await lease.async_release(tuple_awaitable);
    auto [after_ec, after] = co_await locks.async_inspect("looked-at", tuple_awaitable);
    BOOST_TEST(!after_ec);
    BOOST_TEST((after.state == verdict::free));
  });
}

BOOST_AUTO_TEST_CASE(nodes_down_are_named_and_too_few_answers_are_no_quorum) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("down", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    fleet[2].kill9();
    auto [one_ec, one_down] = co_await locks.async_inspect("down", tuple_awaitable);
    BOOST_TEST(!one_ec, one_ec.message());
    BOOST_TEST((one_down.state == verdict::held), redlock::to_string(one_down.state));
    BOOST_TEST(one_down.held_by(lease.token()));
    BOOST_TEST(one_down.answered() == 2u);
    const auto& silent = one_down.nodes[2];
    BOOST_TEST(!silent.answered());
    BOOST_TEST(silent.error_text.find(fleet.configs()[2].address()) != std::string::npos,
               silent.error_text);

    fleet[1].kill9();
    auto [two_ec, two_down] = co_await locks.async_inspect("down", tuple_awaitable);
    BOOST_TEST(two_ec == error::no_quorum, two_ec.message());
    BOOST_TEST((two_down.state == verdict::unknown), redlock::to_string(two_down.state));
    BOOST_TEST(two_down.diagnostics.find("1 of 3 nodes answered") != std::string::npos,
               two_down.diagnostics);
  });
}

BOOST_AUTO_TEST_CASE(rival_leftovers_and_foreign_keys_are_not_held) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    sync_client(fleet[0].port()).command({"SET", "split", "round-a", "PX", "5000"});
    sync_client(fleet[1].port()).command({"SET", "split", "round-b", "PX", "5000"});
    auto [ec, split] = co_await locks.async_inspect("split", tuple_awaitable);
    BOOST_TEST(!ec);
    BOOST_TEST((split.state == verdict::not_held), redlock::to_string(split.state));
    BOOST_TEST(!split.holder.has_value());
    BOOST_TEST(*split.nodes[0].holder == "round-a");
    BOOST_TEST(*split.nodes[1].holder == "round-b");

    sync_client(fleet[0].port()).command({"LPUSH", "listed", "x"});
    auto [ec2, listed] = co_await locks.async_inspect("listed", tuple_awaitable);
    BOOST_TEST(!ec2);
    BOOST_TEST(listed.nodes[0].not_a_lock);
    BOOST_TEST((listed.state == verdict::not_held));

    auto [bad, nothing] = co_await locks.async_inspect("", tuple_awaitable);
    BOOST_TEST(bad == error::invalid_argument);
    BOOST_TEST(nothing.diagnostics.find("empty") != std::string::npos, nothing.diagnostics);
  });
}

BOOST_AUTO_TEST_CASE(a_cancelled_inspection_completes_at_once) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options(2000ms);  // a paused node would take 2 s to time out
    redlock::client locks(io.get_executor(), fleet.configs(), options);
    co_await locks.async_ping(tuple_awaitable);
    fleet[0].pause();
    fleet[1].pause();
    asio::cancellation_signal stop;
    std::optional<error_code> outcome;
    locks.async_inspect(
        "paused", asio::bind_cancellation_slot(
                      stop.slot(), [&](error_code ec, redlock::inspection) { outcome = ec; }));
    co_await sleep_for(50ms);
    BOOST_TEST(!outcome.has_value());
    const auto cancelled_at = steady_clock::now();
    stop.emit(asio::cancellation_type::terminal);
    const bool done = co_await eventually([&] { return outcome.has_value(); }, 1000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(ms_since(cancelled_at) < 500);
    BOOST_TEST(*outcome == asio::error::operation_aborted);
    fleet[0].resume();
    fleet[1].resume();
  });
}

BOOST_AUTO_TEST_CASE(a_semaphore_shows_which_slots_are_held) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore pool(locks, "pool", 3, lock_for(5s));
    auto [ec, permit] = co_await pool.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    auto [inspect_ec, slots] = co_await pool.async_inspect(tuple_awaitable);
    BOOST_TEST(!inspect_ec, inspect_ec.message());
    BOOST_TEST_REQUIRE(slots.size() == 3u);
    std::size_t held = 0;
    for (const auto& slot : slots) {
      if (slot.state == verdict::held) {
        ++held;
        BOOST_TEST(slot.held_by(permit.token()));
        BOOST_TEST(slot.resource == permit.resource());
      } else {
        BOOST_TEST((slot.state == verdict::free), redlock::to_string(slot.state));
      }
    }
    BOOST_TEST(held == 1u);

    redlock::semaphore unnamed(locks, "", 3);
    auto [bad, none] = co_await unnamed.async_inspect(tuple_awaitable);
    BOOST_TEST(bad == error::invalid_argument);
    BOOST_TEST_REQUIRE(none.size() == 1u);
    BOOST_TEST(!none[0].diagnostics.empty());
  });
}

BOOST_AUTO_TEST_SUITE_END()
