// Renewal of a held lock against real redis-server processes: it keeps the lock past its TTL,
// stops at max_hold, signals the loss when a majority dies, and never touches a key that is not
// the lease's own.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

namespace {

using redlock::test::ms_between;

using redlock::test::gone_everywhere;
using redlock::test::record;
using redlock::test::settled_everywhere;
using redlock::test::void_outcome;
using redlock::test::warm_up;

}  // namespace

BOOST_AUTO_TEST_SUITE(lease_renewal)

BOOST_FIXTURE_TEST_CASE(renewal_keeps_the_lock_past_its_ttl, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    co_await warm_up(locks);  // every node gets the SET at once, so every node is sampled from t0
    const auto ttl = 500ms;
    auto [ec, lease] = co_await locks.async_acquire("renewed", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST_REQUIRE(co_await settled_everywhere(nodes, "renewed", lease.token()));
    void_outcome lost;
    lease.async_wait_lost(record(lost));

    std::array<std::vector<long long>, 5> samples;
    bool always_held = true;
    const auto until = steady_clock::now() + 3 * ttl;
    while (steady_clock::now() < until) {
      always_held = always_held && lease.held();
      for (std::size_t i = 0; i < 5; ++i) {
        samples[i].push_back(nodes.pttl(i, "renewed"));
      }
      co_await sleep_for(30ms);
    }
    BOOST_TEST(always_held);
    BOOST_TEST(lost.completions == 0);
    for (std::size_t i = 0; i < 5; ++i) {
      int refreshed = 0;
      long long lowest = ttl.count();
      long long highest = 0;
      for (std::size_t s = 0; s < samples[i].size(); ++s) {
        lowest = std::min(lowest, samples[i][s]);
        highest = std::max(highest, samples[i][s]);
        if (s > 0 && samples[i][s] > samples[i][s - 1]) ++refreshed;
      }
      // Renewal at half-life over three TTLs: about five extensions; ask for three.
      BOOST_TEST(refreshed >= 3, "node " << i << " refreshed " << refreshed << " times");
      BOOST_TEST(lowest > 0, "node " << i << ": key missing or without TTL");
      BOOST_TEST(highest <= ttl.count(), "node " << i);
    }

    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(!lease.held());
    BOOST_TEST(co_await gone_everywhere(nodes, "renewed"));
    const bool lost_done = co_await eventually([&] { return lost.completions == 1; }, 1000ms);
    BOOST_TEST(lost_done);
    BOOST_TEST(lost.ec == asio::error::operation_aborted, lost.ec.message());

    // Renewal has stopped: nothing brings the key back.
    co_await sleep_for(1000ms);
    BOOST_TEST(nodes.present("renewed") == 0u);
    BOOST_TEST(lost.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(max_hold_ends_renewal, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    auto options = lock_for(300ms);
    options.max_hold = 700ms;
    const auto start = steady_clock::now();
    auto [ec, lease] = co_await locks.async_acquire("bounded", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    auto [lost_ec] = co_await lease.async_wait_lost(tuple_awaitable);
    const auto lost_after = ms_since(start);
    BOOST_TEST(lost_ec == error::lock_lost, lost_ec.message());
    BOOST_TEST_MESSAGE("lost after " << lost_after << " ms");
    // Renewal runs at half-life, so a library that skips the renewal that would pass max_hold loses
    // the lock up to half a TTL early (~595 ms); at the latest it lapses one TTL after max_hold.
    BOOST_TEST(lost_after >= 550);
    BOOST_TEST(lost_after <= 700 + 300 + 700);
    BOOST_TEST(!lease.held());
    const bool gone = co_await eventually([&] { return nodes.present("bounded") == 0; }, 1500ms);
    BOOST_TEST(gone);
  });
}

// A lease ended by max_hold says so, whichever way its last extension fell: capped at max_hold
// and confirmed, or none needed. Leases with max_hold spread over two TTLs, so that the last
// extension's TTL takes every value from a few milliseconds to the full TTL.
BOOST_FIXTURE_TEST_CASE(a_lease_ended_by_max_hold_says_so, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    std::vector<redlock::lease> leases;
    for (int i = 0; i < 30; ++i) {
      auto options = lock_for(300ms);
      options.max_hold = std::chrono::milliseconds(400 + 10 * i);
      auto [ec, lease] =
          co_await locks.async_acquire("bounded" + std::to_string(i), options, tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      leases.push_back(std::move(lease));
    }
    for (auto& lease : leases) {
      auto [lost_ec] = co_await lease.async_wait_lost(tuple_awaitable);
      BOOST_TEST((lost_ec == error::lock_lost), lost_ec.message());
      BOOST_TEST(lease.diagnostics().find("max_hold") != std::string::npos, lease.diagnostics());
    }
  });
}

BOOST_AUTO_TEST_CASE(lock_lost_when_majority_dies_while_held) {
  redis_fleet fleet(5);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    const auto ttl = 600ms;
    auto [ec, lease] = co_await locks.async_acquire("fragile", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    void_outcome lost;
    lease.async_wait_lost(record(lost));

    const auto killed_at = steady_clock::now();
    fleet[0].kill9();
    fleet[1].kill9();
    fleet[2].kill9();
    const bool done = co_await eventually([&] { return lost.completions > 0; }, ttl + 3000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(lost.ec == error::lock_lost, lost.ec.message());
    const auto after = ms_between(killed_at, lost.at);
    BOOST_TEST_MESSAGE("lost " << after << " ms after the kill");
    BOOST_TEST(after <= ttl.count() + 1000);
    BOOST_TEST(!lease.held());
    co_await sleep_for(100ms);
    BOOST_TEST(lost.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(renewal_never_touches_a_foreign_key, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    auto [ec, lease] = co_await locks.async_acquire("stolen", lock_for(600ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    const std::string ours = lease.token();

    // Someone else takes the key over on a majority (as after an expiry and a rival's acquire).
    for (std::size_t i = 0; i < 3; ++i) {
      nodes.set(i, "stolen", "someone-else", 5000ms);
    }
    auto [lost_ec] = co_await lease.async_wait_lost(tuple_awaitable);
    BOOST_TEST(lost_ec == error::lock_lost, lost_ec.message());
    BOOST_TEST(!lease.held());

    co_await sleep_for(300ms);  // any late renewal would have landed by now
    for (std::size_t i = 0; i < 3; ++i) {
      BOOST_TEST(nodes.get(i, "stolen").value_or("<none>") == "someone-else", "node " << i);
      const auto pttl = nodes.pttl(i, "stolen");
      // About 5000 minus the time since the overwrite; a renewal would have made it ~600.
      BOOST_TEST(pttl > 2500, "node " << i << " pttl " << pttl);
    }
    for (std::size_t i = 3; i < 5; ++i) {
      const auto value = nodes.get(i, "stolen");
      BOOST_TEST((!value || *value == ours), "node " << i << " holds " << value.value_or(""));
    }
  });
}

BOOST_AUTO_TEST_SUITE_END()
