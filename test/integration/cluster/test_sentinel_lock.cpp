// The lock on a sentinel-managed master (redis+sentinel://) against a real local group: one
// master, one replica, three sentinels. The node finds the master through the sentinels, checks
// it with ROLE, follows a failover (requested, or after the master was killed), skips a sentinel
// that is down or names a stale master, and a Redlock of the group and two standalone servers
// stays exclusive while the group fails over.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/acquire_once.hpp"
#include "support/background_thread.hpp"
#include "support/exclusion_verdict.hpp"
#include "support/fake_server.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/redis_sentinel.hpp"
#include "support/test_pki.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using redlock::test::acquire_once;
using redlock::test::check_fails_at_once;
using redlock::test::contains;
using redlock::test::redis_sentinel;
using redlock::test::redis_sentinel_options;
using redlock::test::renewal;

// A group of `sentinels` sentinels (quorum 1 with one), over TLS or not.
redis_sentinel_options group_of(std::size_t sentinels, bool tls) {
  redis_sentinel_options options;
  options.sentinels = sentinels;
  options.quorum = std::min<std::size_t>(sentinels, 2);
  options.tls = tls;
  return options;
}

std::vector<redlock::node_config> sentinel_node(const redis_sentinel& group,
                                                std::size_t first = 0) {
  return {redlock::node_config::from_url(group.sentinel_url(first))};
}

std::string value_on(const redis_sentinel& group, std::size_t node, const std::string& key) {
  const auto reply = group.command(node, {"GET", key});
  return reply.is_null() ? std::string() : reply.text;
}

// Until every replica holds `key` with `value`. (WAIT would only count the writes of the
// connection it is sent on, and the lock's writes go through the client's.)
asio::awaitable<bool> replicated(const redis_sentinel& group, const std::string& key,
                                 const std::string& value) {
  co_return co_await eventually(
      [&] {
        for (const auto replica : group.replicas()) {
          if (value_on(group, replica, key) != value) return false;
        }
        return true;
      },
      5s);
}

// Acquires `resource` again and again (each try waits up to 1 s) until it succeeds or `bound`
// passes; returns how long that took, or nothing.
asio::awaitable<std::optional<std::chrono::milliseconds>> first_acquire_within(
    redlock::client& locks, const std::string& resource, std::chrono::milliseconds bound,
    const redis_sentinel& group) {
  const auto start = steady_clock::now();
  while (steady_clock::now() - start < bound) {
    auto options = lock_for(5s);
    options.wait = 1s;
    auto [ec, lease] = co_await locks.async_acquire(resource, options, tuple_awaitable);
    if (ec) continue;
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - start);
    BOOST_TEST(value_on(group, group.master(), resource) == lease.token());
    co_await lease.async_release(tuple_awaitable);
    co_return took;
  }
  co_return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel_lock)

// The client's options, its log in the test's messages (where a node went, and when).
redlock::client_options logged_options() {
  auto options = fast_client_options();
  options.logger = [](redlock::log_level, std::string_view message) {
    BOOST_TEST_MESSAGE(steady_clock::now().time_since_epoch().count() / 1000000 << " " << message);
  };
  return options;
}

BOOST_AUTO_TEST_CASE(the_lock_is_taken_on_the_master_the_sentinels_name) {
  redis_sentinel group;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), sentinel_node(group), logged_options());
    auto [ec, lease] = co_await locks.async_acquire("guarded", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    const auto master = group.master();
    BOOST_TEST(value_on(group, master, "guarded") == lease.token());
    BOOST_TEST(co_await replicated(group, "guarded", lease.token()));
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(value_on(group, master, "guarded").empty());
  });
}

// SENTINEL FAILOVER while the client keeps acquiring: it moves when the switch is announced, and
// acquires on the new master soon after. The figures (request to move, move to first acquire,
// the longest time without one) are printed; the bounds only catch a client that does not follow.
BOOST_AUTO_TEST_CASE(a_requested_failover_is_followed_and_a_lease_held_across_it_ends) {
  redis_sentinel group;
  std::atomic<steady_clock::rep> moved_at{0};
  auto options = logged_options();
  options.logger = [&moved_at, logged = options.logger](redlock::log_level level,
                                                        std::string_view message) {
    if (message.find("(it moved)") != std::string_view::npos && moved_at == 0) {
      moved_at = steady_clock::now().time_since_epoch().count();
    }
    logged(level, message);
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), sentinel_node(group), options);
    auto [ec, lease] =
        co_await locks.async_acquire("moving", lock_for(60s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST_REQUIRE(co_await replicated(group, "moving", lease.token()));
    const auto old_master = group.master();

    std::size_t new_master = old_master;
    const auto requested = steady_clock::now();
    redlock::test::background_thread nemesis([&] { new_master = group.failover(); });
    // Probes all along: each waits up to 1 s, then the next one starts 20 ms later.
    std::vector<steady_clock::time_point> acquired;
    while (!nemesis.finished()) {
      auto probe_options = lock_for(5s);
      probe_options.wait = 1s;
      auto [probe_ec, probe] =
          co_await locks.async_acquire("probe", probe_options, tuple_awaitable);
      if (!probe_ec) {
        acquired.push_back(steady_clock::now());
        co_await probe.async_release(tuple_awaitable);
      }
      co_await sleep_for(20ms);
    }
    nemesis.join();
    BOOST_TEST_REQUIRE(new_master != old_master);
    BOOST_TEST_REQUIRE(moved_at != 0);
    const steady_clock::time_point moved{steady_clock::duration(moved_at.load())};
    const auto after_move =
        std::find_if(acquired.begin(), acquired.end(), [&](auto at) { return at >= moved; });
    BOOST_TEST_REQUIRE((after_move != acquired.end()));
    steady_clock::duration longest_gap{};
    for (std::size_t i = 1; i < acquired.size(); ++i) {
      longest_gap = std::max(longest_gap, acquired[i] - acquired[i - 1]);
    }
    const auto ms = [](steady_clock::duration d) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    };
    BOOST_TEST(ms(*after_move - moved) < 5000);
    BOOST_TEST_MESSAGE("failover requested -> client moved "
                       << ms(moved - requested) << " ms; moved -> first acquire "
                       << ms(*after_move - moved) << " ms; longest time without an "
                       << "acquire " << ms(longest_gap) << " ms");

    // Replicated before the failover (the TTL outlasts it), so the key is on the new master, and
    // the release finds it there (at once, or after one resolution when its link to the old
    // master broke under it), well within the bound.
    const auto release_start = steady_clock::now();
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(ms_since(release_start) < 5000);
    BOOST_TEST(value_on(group, new_master, "moving").empty());
  });
}

BOOST_AUTO_TEST_CASE(a_killed_master_is_replaced_and_a_lease_on_it_reports_its_fate) {
  redis_sentinel group;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), sentinel_node(group), logged_options());
    auto [ec, lease] =
        co_await locks.async_acquire("orphaned", lock_for(60s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    const auto old_master = group.master();
    group.stop(old_master);

    // Nobody helps: the sentinels notice (down-after 1 s), vote and promote the replica, and the
    // client follows. Tries go on meanwhile, each failing fast or waiting at most 1 s.
    const auto took = co_await first_acquire_within(locks, "orphaned-then", 30s, group);
    BOOST_TEST_REQUIRE(took.has_value());
    BOOST_TEST(group.master() != old_master);
    BOOST_TEST_MESSAGE("first acquire on the new master " << took->count()
                                                          << " ms after the master was killed");

    // The key may or may not have reached the replica: the release either deletes it there or
    // says the lease is not held, and never hangs.
    const auto release_start = steady_clock::now();
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST((!release_ec || release_ec == error::not_held), release_ec.message()
                                                                   << ": " << lease.diagnostics());
    BOOST_TEST(ms_since(release_start) < 5000);
  });
}

BOOST_AUTO_TEST_CASE(a_sentinel_that_is_down_is_skipped) {
  redis_sentinel group;
  group.stop_sentinel(0);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // The URL names the stopped sentinel first; the seeds answer.
    redlock::client locks(io.get_executor(), sentinel_node(group, 0), fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("skipped", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(value_on(group, group.master(), "skipped") == lease.token());
    co_await lease.async_release(tuple_awaitable);
  });
}

// A sentinel that names the replica (what a sentinel cut off from a failover would say): the
// ROLE check refuses it, and the next sentinel is asked.
BOOST_AUTO_TEST_CASE(a_sentinel_that_names_a_stale_master_is_skipped) {
  redis_sentinel group;
  const auto replica_port = std::to_string(group.port(group.replicas().front()));
  redlock::test::fake_server stale(
      redlock::test::fake::with_handshake([replica_port](const redlock::test::fake_command& command,
                                                         std::size_t) -> redlock::test::fake_reply {
        namespace fake = redlock::test::fake;
        if (fake::is(command, "HELLO")) return fake::resp3_map();
        if (fake::is(command, "SUBSCRIBE"))
          return ">3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";
        if (fake::is(command, "SENTINEL"))
          return "*2\r\n" + fake::bulk("127.0.0.1") + fake::bulk(replica_port);
        return fake::error("ERR unknown command");
      }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto config = sentinel_node(group).front();
    // The stale one first, then every real sentinel.
    config.seeds.insert(config.seeds.begin(), config.address());
    config.port = stale.port();
    redlock::client locks(io.get_executor(), {config}, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("stale", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(value_on(group, group.master(), "stale") == lease.token());
    BOOST_TEST(stale.commands_received("SENTINEL") >= 1u);
    co_await lease.async_release(tuple_awaitable);
  });
}

// rediss+sentinel://: TLS to the sentinels and to the master they name, through a failover.
BOOST_AUTO_TEST_CASE(over_tls_the_master_is_found_and_followed_across_a_failover) {
  redis_sentinel group(group_of(3, true));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto nodes = sentinel_node(group);
    BOOST_TEST_REQUIRE(nodes.front().tls.enabled);
    redlock::client locks(io.get_executor(), nodes, logged_options());
    auto [ec, lease] = co_await locks.async_acquire("secret", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(value_on(group, group.master(), "secret") == lease.token());
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());

    const auto old_master = group.master();
    BOOST_TEST_REQUIRE(group.failover() != old_master);
    const auto took = co_await first_acquire_within(locks, "secret", 10s, group);
    BOOST_TEST_REQUIRE(took.has_value());
    BOOST_TEST_MESSAGE("over TLS, first acquire on the new master " << took->count()
                                                                    << " ms after the failover");
  });
}

// Sentinels whose certificate the client does not trust: a node failure at once, naming the
// sentinel and the cause, not a wait for a master that will never be named.
BOOST_AUTO_TEST_CASE(an_untrusted_sentinel_certificate_fails_at_once_naming_the_sentinel) {
  redis_sentinel group(group_of(1, true));
  auto node = sentinel_node(group).front();
  node.tls.ca_file = redlock::test::shared_test_pki().other_ca().string();
  const auto result = acquire_once({node}, redlock::test::long_wait());
  // The sentinel sends its CA along, which the client's (other) CA did not sign.
  check_fails_at_once(result, error::certificate_rejected, node.address(),
                      "self-signed certificate in certificate chain");
  BOOST_TEST(contains(result.diagnostics, "no sentinel named master"), result.diagnostics);
}

// sentinel_password logs in to the sentinels, the password before the host to the data nodes; a
// wrong sentinel password is a node failure that says so.
BOOST_AUTO_TEST_CASE(the_sentinels_and_the_data_nodes_each_get_their_own_login) {
  auto options = group_of(1, false);
  options.password = "datapass";
  options.sentinel_password = "watchpass";
  redis_sentinel group(options);
  const auto good = acquire_once(sentinel_node(group), redlock::test::default_wait());
  BOOST_TEST(!good.ec, good.ec.message() << ": " << good.diagnostics);

  auto wrong = sentinel_node(group).front();
  wrong.sentinel_password = "not-the-password";
  const auto refused = acquire_once({wrong}, redlock::test::long_wait());
  check_fails_at_once(refused, error::auth_failed, wrong.address(), "WRONGPASS");
  BOOST_TEST(!contains(refused.diagnostics, "not-the-password"), refused.diagnostics);

  // The sentinels let it in; the master does not.
  auto data_refused = sentinel_node(group).front();
  data_refused.password = "not-the-password";
  const auto master_refused = acquire_once({data_refused}, redlock::test::long_wait());
  BOOST_TEST((master_refused.ec == error::auth_failed), master_refused.ec.message());
  BOOST_TEST(master_refused.took_ms < 5000);
  BOOST_TEST(contains(master_refused.diagnostics, std::to_string(group.master_port())),
             master_refused.diagnostics);
}

BOOST_AUTO_TEST_CASE(wait_replicas_counts_a_vote_only_once_replicated) {
  redis_sentinel group;
  // A second for each node: a vote waits for its replicas' acknowledgement (WAIT), which a busy
  // machine may delay past the usual 200 ms.
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    {
      redlock::client locks(
          io.get_executor(),
          {redlock::node_config::from_url(group.sentinel_url() + "&wait_replicas=1")},
          fast_client_options(1s));
      auto [ec, lease] = co_await locks.async_acquire("replicated", lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
      // Granted only once the replica acknowledged it: it is there now, without waiting.
      BOOST_TEST(value_on(group, group.replicas().front(), "replicated") == lease.token());
      co_await lease.async_release(tuple_awaitable);
    }
    {
      // One replica can never acknowledge for two: no vote counts, and the SET is cleaned up.
      redlock::client locks(
          io.get_executor(),
          {redlock::node_config::from_url(group.sentinel_url() + "&wait_replicas=2")},
          fast_client_options(1s));
      auto [ec, lease] =
          co_await locks.async_try_acquire("unreplicated", lock_for(5s), tuple_awaitable);
      BOOST_TEST((ec == redlock::condition::not_acquired), ec.message());
      BOOST_TEST(contains(lease.diagnostics(), "NOREPLICAS"), lease.diagnostics());
      BOOST_TEST(co_await eventually(
          [&] { return value_on(group, group.master(), "unreplicated").empty(); }, 5s));
    }
  });
}

// Release announcements on a sentinel node are subscribed on its master, and the subscription
// moves with the master when the group fails over: a release on the new master wakes a waiter
// whose rounds, without announcements, come 5 s apart (the holder's lease lasts 30 s).
BOOST_AUTO_TEST_CASE(a_waiters_subscription_follows_the_master_across_a_failover) {
  redis_sentinel group;
  const std::string channel = redlock::client_options{}.release_channel;
  const auto subscribers = [&](std::size_t node) {
    const auto reply = group.command(node, {"PUBSUB", "NUMSUB", channel});
    return reply.elements.size() == 2 ? reply.elements[1].integer : -1;
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), sentinel_node(group), logged_options());
    redlock::client waiter(io.get_executor(), sentinel_node(group), logged_options());
    auto [ec, held] =
        co_await holder.async_acquire("waited", lock_for(30s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    BOOST_TEST_REQUIRE(co_await replicated(group, "waited", held.token()));

    std::optional<redlock::error_code> waited;
    redlock::lease won;
    auto patient = lock_for(10s);
    patient.retry = {5s, 5s, 1.0};
    patient.wait = 40s;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [wait_ec, lease] = co_await waiter.async_acquire("waited", patient, tuple_awaitable);
          won = std::move(lease);
          waited = wait_ec;
        },
        asio::detached);
    const auto old_master = group.master();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return subscribers(old_master) == 1; }, 5s),
                       "the waiter subscribes on the master");

    std::size_t new_master = old_master;
    redlock::test::background_thread nemesis([&] { new_master = group.failover(); });
    BOOST_TEST_REQUIRE(co_await eventually([&] { return nemesis.finished(); }, 60s));
    nemesis.join();
    BOOST_TEST_REQUIRE(new_master != old_master);
    BOOST_TEST(co_await eventually([&] { return subscribers(new_master) == 1; }, 10s),
               "the subscription moved to the new master");
    BOOST_TEST(subscribers(old_master) == 0);
    co_await sleep_for(300ms);  // refused on the new master (the key came over), and asleep
    BOOST_TEST_REQUIRE(!waited.has_value(), "the waiter finished before the release: "
                                                << waited->message() << ": " << won.diagnostics());

    const auto released = steady_clock::now();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(!release_ec, release_ec.message() << ": " << held.diagnostics());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return waited.has_value(); }, 40s));
    const auto took = ms_since(released);
    BOOST_TEST(!*waited, waited->message() << ": " << won.diagnostics());
    BOOST_TEST(took < 2000, "woken " << took << " ms after the release");
    BOOST_TEST_MESSAGE("woken " << took << " ms after the release");
    co_await won.async_release(tuple_awaitable);
    BOOST_TEST(co_await eventually([&] { return subscribers(new_master) == 0; }, 5s),
               "no subscription is left once nobody waits");
  });
}

BOOST_AUTO_TEST_CASE(a_redlock_with_a_sentinel_group_stays_exclusive_while_it_fails_over) {
  redis_sentinel group;
  redis_fleet fleet(2);
  redlock::test::history log;
  redlock::test::background_thread nemesis([&] {
    std::this_thread::sleep_for(500ms);
    group.failover();
    std::this_thread::sleep_for(500ms);
  });
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto nodes = fleet.configs();
    nodes.push_back(sentinel_node(group).front());
    std::vector<std::unique_ptr<redlock::client>> clients;
    for (int c = 0; c < 3; ++c) {
      clients.push_back(
          std::make_unique<redlock::client>(io.get_executor(), nodes, fast_client_options()));
    }
    int running = 0;
    int acquisitions = 0;
    for (std::size_t c = 0; c < clients.size(); ++c) {
      ++running;
      asio::co_spawn(
          io,
          [&, c]() -> asio::awaitable<void> {
            redlock::test::lock_recorder me(log, "client" + std::to_string(c), "shared");
            while (!nemesis.finished()) {
              auto options = redlock::test::plain_lock(1s);
              options.wait = 500ms;
              auto held = co_await me.acquire(*clients[c], options);
              if (me.last_error()) continue;
              ++acquisitions;
              co_await sleep_for(2ms);
              co_await me.release(held);
            }
            --running;
          },
          asio::detached);
    }
    BOOST_TEST(co_await eventually([&] { return running == 0; }, 60s));
    BOOST_TEST(acquisitions > 10);
  });
  nemesis.join();
  BOOST_TEST(redlock::test::judge_exclusion(log).ok());
}

BOOST_AUTO_TEST_SUITE_END()
