// The mutual-exclusion checker (support/history.hpp) against unsafe variants of the lock: a release
// by plain DEL, a renewal that re-SETs, a holder that ignores its validity, a node restarted at
// once. Each unsafe variant must make the checker report an overlap, and the library in the same
// situation must not: a checker that cannot fail proves nothing.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/exclusion_verdict.hpp"
#include "support/fleet_commands.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <limits>
#include <string>
#include <string_view>

namespace {

using redlock::test::mono_now;
using redlock::test::to_mono_ns;

using recorder = redlock::test::lock_recorder;
using redlock::test::plain_lock;

using redlock::test::on_every_node;

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
      const auto result = redlock::test::judge_exclusion(log);
      BOOST_TEST(result.ok() == !unsafe, result.describe());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(unsafe_variants)

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

BOOST_AUTO_TEST_SUITE_END()
