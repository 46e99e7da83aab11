// Renewal of a held lock against real redis-server processes: it keeps the lock past its TTL,
// stops at max_hold, signals the loss when a majority dies, and never touches a key that is not
// the lease's own.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/extension_counter.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace {

using redlock::test::extension_counter;
using redlock::test::ms_between;

using redlock::test::gone_everywhere;
using redlock::test::record;
using redlock::test::settled_everywhere;
using redlock::test::void_outcome;
using redlock::test::warm_up;

// Scripts a node ran by their digest, failed ones included.
long long evalsha_calls(std::uint16_t port) {
  return redlock::test::info_counter(port, "commandstats", "cmdstat_evalsha:calls=");
}

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

// The renewals of a client's leases that fall due in one tick go out as one request per node
// (a batch, ops/extend.cpp). Many leases renewed together: every one is kept, every node's copy
// of every key is refreshed, and the nodes run far fewer scripts than there were renewals.
BOOST_FIXTURE_TEST_CASE(renewals_of_many_leases_go_out_together, redlock::test::five_nodes) {
  const auto counter = std::make_shared<extension_counter>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // Every node's copy must be refreshed each time, so no node may miss a renewal: a reply later
    // than node_timeout fails that node's part of the batch, and the key there then runs out. The
    // timeout is generous for a busy host (a stalled server is another suite's subject).
    auto options = fast_client_options(1000ms);
    options.observer = counter;
    redlock::client locks(io.get_executor(), fleet.configs(), options);
    const auto ttl = 2000ms;
    std::vector<redlock::lease> leases;
    for (int i = 0; i < 40; ++i) {
      auto [ec, lease] = co_await locks.async_acquire("together" + std::to_string(i), lock_for(ttl),
                                                      tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      leases.push_back(std::move(lease));
    }
    std::vector<long long> scripts_before;
    for (std::size_t n = 0; n < 5; ++n)
      scripts_before.push_back(evalsha_calls(fleet[n].port()));
    const std::size_t confirmed_before = counter->confirmed;

    bool always_held = true;
    const auto until = steady_clock::now() + 3 * ttl;
    while (steady_clock::now() < until) {
      for (const auto& lease : leases)
        always_held = always_held && lease.held();
      co_await sleep_for(20ms);
    }
    BOOST_TEST(always_held);
    BOOST_TEST(counter->lost == 0u);
    const std::size_t renewals = counter->confirmed - confirmed_before;
    // Renewal at half-life over three TTLs: about six per lease; ask for three.
    BOOST_TEST(renewals >= 40u * 3, renewals << " renewals confirmed");
    for (std::size_t n = 0; n < 5; ++n) {
      const long long scripts = evalsha_calls(fleet[n].port()) - scripts_before[n];
      BOOST_TEST_MESSAGE("node " << n << ": " << scripts << " scripts for " << renewals
                                 << " renewals");
      BOOST_TEST(scripts * 2 <= static_cast<long long>(renewals), "node " << n << ": " << scripts);
      for (int i = 0; i < 40; ++i) {
        const auto left = nodes.pttl(n, "together" + std::to_string(i));
        BOOST_TEST((left > 0 && left <= ttl.count()), "node " << n << " key " << i << ": " << left);
      }
    }
    for (auto& lease : leases) {
      auto [release_ec] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST(!release_ec, release_ec.message());
    }
    BOOST_TEST(co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms));
  });
}

// One request renews many leases, but each lease is judged by its own key's answers: a lease
// whose key someone else took on a majority is lost, a key that cannot be read on one node fails
// only that lease's answer there, and neither key is touched.
BOOST_FIXTURE_TEST_CASE(a_batched_renewal_judges_each_lease_by_its_own_key,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    const auto ttl = 500ms;
    std::vector<redlock::lease> leases;
    for (int i = 0; i < 10; ++i) {
      const std::string key = "judged" + std::to_string(i);
      auto [ec, lease] = co_await locks.async_acquire(key, lock_for(ttl), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      BOOST_TEST_REQUIRE(co_await settled_everywhere(nodes, key, lease.token()));
      leases.push_back(std::move(lease));
    }
    void_outcome lost_taken;
    leases[3].async_wait_lost(record(lost_taken));
    for (std::size_t n = 0; n < 3; ++n)
      nodes.set(n, "judged3", "someone else", 5000ms);
    {
      sync_client node(fleet[4].port());
      node.command({"DEL", "judged5"});
      node.command({"RPUSH", "judged5", "not a lock"});
    }

    const bool lost = co_await eventually([&] { return lost_taken.completions == 1; }, 2000ms);
    BOOST_TEST_REQUIRE(lost, "the lease whose key was taken was not lost");
    BOOST_TEST(lost_taken.ec == error::lock_lost, lost_taken.ec.message());
    BOOST_TEST(leases[3].diagnostics().find("not ours") != std::string::npos,
               leases[3].diagnostics());
    co_await sleep_for(3 * ttl);
    for (int i = 0; i < 10; ++i) {
      if (i != 3) BOOST_TEST(leases[i].held(), "lease " << i << " lost");
    }
    for (std::size_t n = 0; n < 3; ++n) {
      BOOST_TEST(nodes.get(n, "judged3").value_or("(none)") == "someone else");
      BOOST_TEST(nodes.pttl(n, "judged3") > 3000, "node " << n << ": the taken key was touched");
    }
    sync_client node(fleet[4].port());
    BOOST_TEST(node.command({"TYPE", "judged5"}).text == "list");
    BOOST_TEST(node.command({"TTL", "judged5"}).integer == -1, "the list was given a TTL");
    for (std::size_t n = 0; n < 4; ++n)
      BOOST_TEST(nodes.get(n, "judged5").value_or("(none)") == leases[5].token());
  });
}

// A batch answered NOSCRIPT by every node (the script cache flushed) fails every lease's renewal
// once; the scripts are loaded again and the renewals tried again succeed while the leases are
// still valid.
BOOST_FIXTURE_TEST_CASE(batched_renewals_survive_a_flushed_script_cache,
                        redlock::test::five_nodes) {
  const auto counter = std::make_shared<extension_counter>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options(100ms);
    options.observer = counter;
    redlock::client locks(io.get_executor(), fleet.configs(), options);
    const auto ttl = 600ms;
    std::vector<redlock::lease> leases;
    for (int i = 0; i < 10; ++i) {
      auto [ec, lease] = co_await locks.async_acquire("flushed" + std::to_string(i), lock_for(ttl),
                                                      tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      leases.push_back(std::move(lease));
    }
    for (std::size_t n = 0; n < 5; ++n)
      sync_client(fleet[n].port()).command({"SCRIPT", "FLUSH"});
    const auto confirmed_before = counter->confirmed;
    co_await sleep_for(3 * ttl);
    for (int i = 0; i < 10; ++i)
      BOOST_TEST(leases[i].held(), "lease " << i << " lost");
    BOOST_TEST(counter->lost == 0u);
    BOOST_TEST(counter->failed >= 1u, "no renewal met the flushed cache");
    BOOST_TEST(counter->confirmed - confirmed_before >= 10u * 2);
  });
}

BOOST_AUTO_TEST_SUITE_END()
