// The lock on a Redis Cluster node (redis+cluster://) against a real local cluster of three
// masters with a replica each: keys go to the master of their hash slot, slots that move while a
// lock is held are followed through ASK and MOVED, a shard's failover is followed, a stopped
// shard fails only its own resources, and wait_replicas makes a vote wait for the replicas.

#include "algo/hash_slot.hpp"
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/observer.hpp"
#include "redlock/redlock.hpp"
#include "support/printing.hpp"
#include "support/redis_cluster.hpp"
#include "support/text_contains.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using redlock::test::redis_cluster;
using redlock::test::renewal;

using redlock::test::contains;

// The shard whose master serves `key` now.
std::size_t shard_of_key(const redis_cluster& cluster, const std::string& key) {
  return cluster.shard_of(cluster.master_of_slot(cluster.key_slot(key)));
}

// A resource name whose slot `shard` serves.
std::string resource_of_shard(const redis_cluster& cluster, std::size_t shard,
                              const std::string& stem) {
  for (int i = 0; i < 1000; ++i) {
    std::string name = stem + ":" + std::to_string(i);
    if (shard_of_key(cluster, name) == shard) return name;
  }
  throw std::runtime_error("no resource of shard " + std::to_string(shard));
}

std::string value_on(const redis_cluster& cluster, std::size_t node, const std::string& key) {
  const auto reply = cluster.command(node, {"GET", key});
  return reply.is_null() ? std::string() : reply.text;
}

long long keys_on_masters(const redis_cluster& cluster) {
  long long total = 0;
  for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
    if (cluster.live(cluster.master(shard))) total += cluster.dbsize(cluster.master(shard));
  }
  return total;
}

std::vector<redlock::node_config> cluster_node(const redis_cluster& cluster,
                                               std::string_view query = {}) {
  std::string url = cluster.seeds_url();
  if (!query.empty()) url += std::string(url.find('?') == std::string::npos ? "?" : "&") += query;
  return {redlock::node_config::from_url(url)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster_lock)

BOOST_AUTO_TEST_CASE(locks_on_every_shard_live_on_the_master_of_their_slot) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    std::vector<redlock::lease> held;
    std::set<std::size_t> shards_used;
    for (int i = 0; i < 300; ++i) {
      const std::string resource = "order:" + std::to_string(i);
      auto [ec, lease] = co_await locks.async_acquire(resource, lock_for(10s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, resource << ": " << ec.message() << ": " << lease.diagnostics());
      const auto shard = shard_of_key(cluster, resource);
      shards_used.insert(shard);
      BOOST_TEST(value_on(cluster, cluster.master(shard), resource) == lease.token(), resource);
      held.push_back(std::move(lease));
    }
    BOOST_TEST(shards_used.size() == cluster.shards());
    BOOST_TEST(keys_on_masters(cluster) == 300);
    for (auto& lease : held) {
      auto [ec] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST(!ec, lease.resource() << ": " << ec.message());
    }
    BOOST_TEST(keys_on_masters(cluster) == 0);
  });
}

BOOST_AUTO_TEST_CASE(contenders_on_a_cluster_never_overlap) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // Three clients (three "processes") with three contenders each on two resources: one held
    // at a time per resource, checked by an occupancy count on this one thread.
    std::vector<std::unique_ptr<redlock::client>> clients;
    for (int c = 0; c < 3; ++c) {
      clients.push_back(std::make_unique<redlock::client>(io.get_executor(), cluster_node(cluster),
                                                          fast_client_options()));
    }
    int occupancy[2] = {0, 0};
    int worst = 0;
    int acquisitions = 0;
    int running = 0;
    const auto until = steady_clock::now() + 2s;
    for (auto& client : clients) {
      for (int k = 0; k < 6; ++k) {
        ++running;
        asio::co_spawn(
            io,
            [&, k, locks = client.get()]() -> asio::awaitable<void> {
              const int which = k % 2;
              const std::string resource = which == 0 ? "{acct}:a" : "acct:b";
              while (steady_clock::now() < until) {
                auto [ec, lease] =
                    co_await locks->async_acquire(resource, lock_for(2s), tuple_awaitable);
                if (ec) continue;
                worst = std::max(worst, ++occupancy[which]);
                ++acquisitions;
                co_await sleep_for(1ms);
                --occupancy[which];
                co_await lease.async_release(tuple_awaitable);
              }
              --running;
            },
            asio::detached);
      }
    }
    BOOST_TEST(co_await eventually([&] { return running == 0; }, 30s));
    BOOST_TEST(worst == 1);
    BOOST_TEST(acquisitions > 20);
    BOOST_TEST(keys_on_masters(cluster) == 0);
  });
}

BOOST_AUTO_TEST_CASE(a_slot_moved_while_held_is_followed_by_extend_and_release) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string resource = resource_of_shard(cluster, 0, "moving");
    const auto slot = cluster.key_slot(resource);
    auto [ec, lease] =
        co_await locks.async_acquire(resource, lock_for(10s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());

    // Mid-migration, with the key already on the target: the source answers ASK.
    cluster.begin_migration(slot, 1);
    BOOST_TEST(cluster.move_keys(slot) == 1u);
    const auto target = cluster.master(1);
    BOOST_TEST(value_on(cluster, target, resource).empty() == false);
    // (The target answers for the key only after ASKING, which is what the lease must send.)
    auto [extend_ec] = co_await lease.async_extend(20s, tuple_awaitable);
    BOOST_TEST(!extend_ec, extend_ec.message() << ": " << lease.diagnostics());

    // Done: the source answers MOVED, and the client learns the slot's new master.
    cluster.finish_migration(slot);
    BOOST_TEST(cluster.command(target, {"PTTL", resource}).integer > 10000);
    std::tie(extend_ec) = co_await lease.async_extend(30s, tuple_awaitable);
    BOOST_TEST(!extend_ec, extend_ec.message() << ": " << lease.diagnostics());
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(keys_on_masters(cluster) == 0);

    auto [again_ec, again] = co_await locks.async_acquire(resource, lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!again_ec, again_ec.message() << ": " << again.diagnostics());
    BOOST_TEST(value_on(cluster, target, resource) == again.token());
    co_await again.async_release(tuple_awaitable);
  });
}

// The read-write lock on a cluster: its keys share the slot of its name, so each script runs on
// that slot's master. Readers of two clients hold together, a writer is refused and then waits with
// its mark on the master, the slot moves to another shard while they hold (ASK, then MOVED), and
// the waiting writer gets in on the new master once the readers leave.
BOOST_AUTO_TEST_CASE(a_read_write_lock_follows_its_slot) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), cluster_node(cluster), fast_client_options());
    redlock::client second(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string name = resource_of_shard(cluster, 0, "catalog");
    const auto slot = cluster.key_slot(name);
    const auto source = cluster.master(0);
    const auto readers_key = redlock::detail::rw_readers_key(name);
    const auto mark_key = redlock::detail::rw_mark_key(name);
    for (const auto& key : {readers_key, mark_key, redlock::detail::rw_writer_key(name)})
      BOOST_TEST(cluster.key_slot(key) == slot, key);

    const auto reading = lock_for(10s, renewal::off);
    redlock::rw_lock mine(first, name, reading);
    redlock::rw_lock theirs(second, name, reading);
    auto [a_ec, a] = co_await mine.async_acquire_read(tuple_awaitable);
    auto [b_ec, b] = co_await theirs.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!a_ec, a_ec.message() << ": " << a.diagnostics());
    BOOST_TEST_REQUIRE(!b_ec, b_ec.message() << ": " << b.diagnostics());
    BOOST_TEST(cluster.command(source, {"ZCARD", readers_key}).integer == 2);

    auto writing = lock_for(10s);
    writing.wait = 30s;
    redlock::rw_lock writer(second, name, writing);
    auto [refused, none] = co_await writer.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    std::optional<error_code> wrote;
    redlock::lease written;
    writer.async_acquire_write([&](error_code ec, redlock::lease l) {
      written = std::move(l);
      wrote = ec;
    });
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] {
          return cluster.command(source, {"EXISTS", mark_key}).integer == 1;
        },
        10s));
    // Behind the mark a new reader is refused.
    auto [late_ec, late] = co_await mine.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST((late_ec == redlock::condition::not_acquired), late_ec.message());

    // Mid-migration, the keys already on the target: a reader's extension follows ASK.
    cluster.begin_migration(slot, 1);
    BOOST_TEST(cluster.move_keys(slot) >= 2u);
    const auto target = cluster.master(1);
    auto [extend_ec] = co_await a.async_extend(20s, tuple_awaitable);
    BOOST_TEST(!extend_ec, extend_ec.message() << ": " << a.diagnostics());
    cluster.finish_migration(slot);
    BOOST_TEST(cluster.command(target, {"ZCARD", readers_key}).integer == 2);

    // The readers leave: the writer, waiting all along, takes the lock on the new master.
    auto [a_released] = co_await a.async_release(tuple_awaitable);
    auto [b_released] = co_await b.async_release(tuple_awaitable);
    BOOST_TEST(!a_released, a_released.message());
    BOOST_TEST(!b_released, b_released.message());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return wrote.has_value(); }, 20s));
    BOOST_TEST_REQUIRE(!*wrote, wrote->message() << ": " << written.diagnostics());
    BOOST_TEST(value_on(cluster, target, redlock::detail::rw_writer_key(name)) == written.token());
    BOOST_TEST(cluster.command(target, {"EXISTS", mark_key}).integer == 0);
    auto [released] = co_await written.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST(co_await eventually([&] { return keys_on_masters(cluster) == 0; }, 5s));
  });
}

BOOST_AUTO_TEST_CASE(a_shard_failover_is_followed) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string resource = resource_of_shard(cluster, 2, "failing-over");
    auto [ec, lease] =
        co_await locks.async_acquire(resource, lock_for(10s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());

    const auto old_master = cluster.master(2);
    cluster.failover(2);
    BOOST_TEST(cluster.master(2) != old_master);

    // The key was replicated before the manual failover: the lease still holds it, on the new
    // master, and its release reaches it there.
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(value_on(cluster, cluster.master(2), resource).empty());

    // New locks on the shard work, at the latest after one topology refresh.
    const auto start = steady_clock::now();
    bool acquired = false;
    while (!acquired && steady_clock::now() - start < 10s) {
      auto [again_ec, again] =
          co_await locks.async_acquire(resource, lock_for(5s), tuple_awaitable);
      if (again_ec) continue;
      acquired = true;
      BOOST_TEST(value_on(cluster, cluster.master(2), resource) == again.token());
      co_await again.async_release(tuple_awaitable);
    }
    BOOST_TEST(acquired);
    BOOST_TEST_MESSAGE("acquired on the new master " << ms_since(start)
                                                     << " ms after the failover");

    // The old master is a replica now: the client's link to it is closed, not kept reconnecting.
    const auto lock_links_on = [&](std::size_t node) {
      const auto list = cluster.command(node, {"CLIENT", "LIST"}).text;
      std::size_t count = 0;
      for (auto at = list.find("name=redlock-asio "); at != std::string::npos;
           at = list.find("name=redlock-asio ", at + 1))
        ++count;
      return count;
    };
    BOOST_TEST(co_await eventually([&] { return lock_links_on(old_master) == 0; }, 10s));
    BOOST_TEST(lock_links_on(cluster.master(2)) == 1u);
  });
}

BOOST_AUTO_TEST_CASE(fencing_and_semaphores_on_a_cluster) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    auto fenced = lock_for(5s);
    fenced.fencing = true;
    std::uint64_t last = 0;
    for (int i = 0; i < 3; ++i) {
      auto [ec, lease] = co_await locks.async_acquire("ledger", fenced, tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
      BOOST_TEST_REQUIRE(lease.fencing_token().has_value());
      BOOST_TEST(*lease.fencing_token() > last);
      last = *lease.fencing_token();
      co_await lease.async_release(tuple_awaitable);
    }

    redlock::semaphore pool(locks, "pool", 2, lock_for(5s));
    auto [a_ec, a] = co_await pool.async_acquire(tuple_awaitable);
    auto [b_ec, b] = co_await pool.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!a_ec, a_ec.message() << ": " << a.diagnostics());
    BOOST_TEST_REQUIRE(!b_ec, b_ec.message() << ": " << b.diagnostics());
    auto [c_ec, c] = co_await pool.async_try_acquire(tuple_awaitable);
    BOOST_TEST(c_ec == error::contended, c_ec.message() << ": " << c.diagnostics());
    co_await a.async_release(tuple_awaitable);
    co_await b.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(names_whose_keys_would_span_slots_are_refused_with_a_reason) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    // One key: any name works.
    auto [plain_ec, plain] = co_await locks.async_acquire("a}b", lock_for(5s), tuple_awaitable);
    BOOST_TEST(!plain_ec, plain_ec.message() << ": " << plain.diagnostics());
    co_await plain.async_release(tuple_awaitable);
    // A fence counter or semaphore slots beside it: refused before anything is sent.
    auto fenced = lock_for(5s);
    fenced.fencing = true;
    auto [fenced_ec, lease] = co_await locks.async_acquire("a}b", fenced, tuple_awaitable);
    BOOST_TEST(fenced_ec == error::invalid_argument, fenced_ec.message());
    BOOST_TEST(contains(lease.diagnostics(), "hash tag"), lease.diagnostics());
    redlock::semaphore pool(locks, "p}q", 2, lock_for(5s));
    auto [pool_ec, permit] = co_await pool.async_try_acquire(tuple_awaitable);
    BOOST_TEST(pool_ec == error::invalid_argument, pool_ec.message());
    BOOST_TEST(contains(permit.diagnostics(), "hash tag"), permit.diagnostics());
    // With a hash tag the same shapes work.
    auto [tagged_ec, tagged] = co_await locks.async_acquire("{a}b}", fenced, tuple_awaitable);
    BOOST_TEST(!tagged_ec, tagged_ec.message() << ": " << tagged.diagnostics());
    co_await tagged.async_release(tuple_awaitable);
    BOOST_TEST(keys_on_masters(cluster) == 1);  // the fence counter, which has no TTL
  });
}

// A set of locks on a cluster: its keys must share a hash slot, as one script sets them all. With
// one hash tag the set is held on the master of that slot, fenced per resource; without one it is
// refused before anything is sent, saying how to fix it.
BOOST_AUTO_TEST_CASE(a_set_of_locks_needs_one_hash_slot) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::vector<std::string> spread_set = {"acct:1", "acct:2"};
    auto [spread_ec, spread] =
        co_await locks.async_acquire_all(spread_set, lock_for(5s), tuple_awaitable);
    BOOST_TEST(spread_ec == error::invalid_argument, spread_ec.message());
    BOOST_TEST(contains(spread.diagnostics(), "one hash tag"), spread.diagnostics());
    BOOST_TEST(keys_on_masters(cluster) == 0);

    auto fenced = lock_for(5s);
    fenced.fencing = true;
    const std::vector<std::string> tagged_set = {"{acct}:1", "{acct}:2", "{acct}:3"};
    auto [ec, set] = co_await locks.async_acquire_all(tagged_set, fenced, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << set.diagnostics());
    const auto master = cluster.master(shard_of_key(cluster, "{acct}"));
    for (const auto& resource : set.resources())
      BOOST_TEST(value_on(cluster, master, resource) == set.token(), resource);
    BOOST_TEST(set.fencing_token("{acct}:2").value_or(0) >= 1u);
    auto [extended] = co_await set.async_extend(10s, tuple_awaitable);
    BOOST_TEST(!extended, extended.message());
    auto [released] = co_await set.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST(keys_on_masters(cluster) == 3);  // the fence counters, which have no TTL
  });
}

BOOST_AUTO_TEST_CASE(a_redlock_of_a_cluster_and_two_standalone_servers) {
  redis_cluster cluster;
  redis_fleet fleet(2);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto nodes = fleet.configs();
    nodes.push_back(cluster_node(cluster).front());
    redlock::client locks(io.get_executor(), nodes, fast_client_options());
    BOOST_TEST(locks.quorum() == 2u);
    auto [ec, lease] = co_await locks.async_acquire("mixed", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    // The cluster node may answer after the two standalone ones decided: it reads its topology
    // and connects to the shard first.
    const auto shard_master = cluster.master(shard_of_key(cluster, "mixed"));
    BOOST_TEST(co_await eventually(
        [&] { return value_on(cluster, shard_master, "mixed") == lease.token(); }, 5s));
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(keys_on_masters(cluster) == 0);
  });
}

BOOST_AUTO_TEST_CASE(a_stopped_shard_master_fails_only_its_own_resources) {
  redlock::test::redis_cluster_options options;
  options.node_timeout = 60s;  // no automatic failover during the test
  redis_cluster cluster(3, 1, options);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string down = resource_of_shard(cluster, 1, "down");
    const std::string up = resource_of_shard(cluster, 0, "up");
    // Connected to every shard first, so that the stop is met by a link that breaks.
    for (const auto& name : {down, up}) {
      auto [ec, lease] = co_await locks.async_acquire(name, lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      co_await lease.async_release(tuple_awaitable);
    }
    const auto stopped = cluster.master(1);
    cluster.stop(stopped);
    auto [down_ec, down_lease] =
        co_await locks.async_try_acquire(down, lock_for(5s), tuple_awaitable);
    BOOST_TEST((down_ec == redlock::condition::not_acquired), down_ec.message());
    BOOST_TEST(contains(down_lease.diagnostics(), std::to_string(cluster.port(stopped))),
               down_lease.diagnostics());
    auto [up_ec, up_lease] = co_await locks.async_acquire(up, lock_for(5s), tuple_awaitable);
    BOOST_TEST(!up_ec, up_ec.message() << ": " << up_lease.diagnostics());
    co_await up_lease.async_release(tuple_awaitable);
  });
}

// client_options::observer on a cluster node: the node is down while one of its masters is
// unreachable, and up again once that master is back.
BOOST_AUTO_TEST_CASE(a_stopped_shard_master_is_reported_as_its_node_down) {
  struct node_watch : redlock::observer {
    void on_node(const redlock::node_event& e) override {
      changes.push_back(e.up);
      last_error = e.error;
      address = std::string(e.address);
    }
    std::vector<bool> changes;
    error_code last_error;
    std::string address;
  };
  redlock::test::redis_cluster_options options;
  options.node_timeout = 60s;  // no automatic failover during the test
  redis_cluster cluster(3, 1, options);
  auto watch = std::make_shared<node_watch>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto client_options = fast_client_options();
    client_options.observer = watch;
    redlock::client locks(io.get_executor(), cluster_node(cluster), client_options);
    for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
      const std::string name = resource_of_shard(cluster, shard, "watched");
      auto [ec, lease] = co_await locks.async_acquire(name, lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      co_await lease.async_release(tuple_awaitable);
    }
    BOOST_TEST_REQUIRE(watch->changes == std::vector<bool>{true});
    BOOST_TEST(watch->address == cluster_node(cluster).front().address());

    const auto stopped = cluster.master(1);
    cluster.stop(stopped);
    const bool down = co_await eventually(
        [&] {
          return watch->changes == std::vector<bool>{true, false};
        },
        5s);
    BOOST_TEST_REQUIRE(down);
    BOOST_TEST(watch->last_error == error::connection_lost, watch->last_error.message());

    cluster.restart(stopped);
    const bool up = co_await eventually(
        [&] {
          return watch->changes == std::vector<bool>{true, false, true};
        },
        10s);
    BOOST_TEST(up);
  });
}

BOOST_AUTO_TEST_CASE(wait_replicas_counts_a_vote_only_once_replicated) {
  redis_cluster cluster;
  // A second for each node: a vote waits for its replicas' acknowledgement (WAIT), which a busy
  // machine may delay past the usual 200 ms.
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    {
      redlock::client locks(io.get_executor(), cluster_node(cluster, "wait_replicas=1"),
                            fast_client_options(1s));
      auto [ec, lease] = co_await locks.async_acquire("replicated", lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
      const auto shard = shard_of_key(cluster, "replicated");
      // A replica redirects a GET (MOVED), but lists its copies.
      const auto copies = cluster.keys_on(cluster.replicas(shard).front());
      BOOST_TEST((std::find(copies.begin(), copies.end(), "replicated") != copies.end()));
      auto [extend_ec] = co_await lease.async_extend(8s, tuple_awaitable);
      BOOST_TEST(!extend_ec, extend_ec.message() << ": " << lease.diagnostics());
      co_await lease.async_release(tuple_awaitable);
    }
    {
      // Each master has one replica: two can never acknowledge, and no vote counts.
      redlock::client locks(io.get_executor(), cluster_node(cluster, "wait_replicas=2"),
                            fast_client_options(1s));
      auto [ec, lease] =
          co_await locks.async_try_acquire("unreplicated", lock_for(5s), tuple_awaitable);
      BOOST_TEST((ec == redlock::condition::not_acquired), ec.message());
      BOOST_TEST(contains(lease.diagnostics(), "NOREPLICAS"), lease.diagnostics());
      // The SET that may have been written is cleaned up.
      BOOST_TEST(co_await eventually([&] { return keys_on_masters(cluster) == 0; }, 5s));
    }
  });
}

// A client waiting for `resource` (another holds it for 30 s) whose rounds, without
// announcements, come 5 s apart or at the holder's expiry: woken within 2 s of a release only by
// the announcement.
struct patient_waiter {
  redlock::client& client;
  std::string resource;
  std::optional<error_code> waited;
  redlock::lease won;

  void start(asio::io_context& io) {
    auto patient = lock_for(10s);
    patient.retry = {5s, 5s, 1.0};
    patient.wait = 40s;
    asio::co_spawn(
        io,
        [this, patient]() -> asio::awaitable<void> {
          auto [wait_ec, lease] = co_await client.async_acquire(resource, patient, tuple_awaitable);
          won = std::move(lease);
          waited = wait_ec;
        },
        asio::detached);
  }

  // Releases `held` and checks that this waiter gets the lock soon after.
  asio::awaitable<void> woken_by_release_of(redlock::lease& held) {
    BOOST_TEST_REQUIRE(!waited.has_value(), "the waiter finished before the release: "
                                                << waited->message() << ": " << won.diagnostics()
                                                << "; the holder's lease: " << held.diagnostics());
    const auto released = steady_clock::now();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return waited.has_value(); }, 40s));
    const auto took = ms_since(released);
    BOOST_TEST(!*waited, waited->message() << ": " << won.diagnostics());
    BOOST_TEST(took < 2000, "woken " << took << " ms after the release");
    BOOST_TEST_MESSAGE("woken " << took << " ms after the release");
    co_await won.async_release(tuple_awaitable);
  }
};

// Clients subscribed to the release announcements of `key`'s slot on `node` (the shard channel
// of the slot, PUBSUB SHARDNUMSUB), and to the plain channel (PUBSUB NUMSUB).
long long shard_subscribers(const redis_cluster& cluster, std::size_t node,
                            const std::string& key) {
  const auto channel = redlock::detail::in_slot(static_cast<std::uint16_t>(cluster.key_slot(key)),
                                                redlock::client_options{}.release_channel);
  const auto reply = cluster.command(node, {"PUBSUB", "SHARDNUMSUB", channel});
  return reply.elements.size() == 2 ? reply.elements[1].integer : -1;
}

long long plain_subscribers(const redis_cluster& cluster, std::size_t node) {
  const auto reply =
      cluster.command(node, {"PUBSUB", "NUMSUB", redlock::client_options{}.release_channel});
  return reply.elements.size() == 2 ? reply.elements[1].integer : -1;
}

BOOST_AUTO_TEST_CASE(a_release_is_announced_on_the_shard_of_its_slot_and_wakes_a_waiter) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), cluster_node(cluster), fast_client_options());
    redlock::client waiter(io.get_executor(), cluster_node(cluster), fast_client_options());
    // On the last shard: neither the first seed nor the node the URL names.
    const std::string resource = resource_of_shard(cluster, 2, "woken");
    auto [ec, held] = co_await holder.async_acquire(resource, lock_for(30s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    patient_waiter w{waiter, resource, {}, {}};
    w.start(io);
    const auto owner = cluster.master(2);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return shard_subscribers(cluster, owner, resource) == 1; }, 10s));
    for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
      BOOST_TEST(plain_subscribers(cluster, cluster.master(shard)) == 0);
      if (shard != 2) BOOST_TEST(shard_subscribers(cluster, cluster.master(shard), resource) == 0);
    }
    co_await sleep_for(300ms);  // refused again once subscribed, and asleep
    co_await w.woken_by_release_of(held);
    // Nobody waits: the subscriptions are gone with the connections.
    BOOST_TEST(
        co_await eventually([&] { return shard_subscribers(cluster, owner, resource) == 0; }, 10s));
  });
}

BOOST_AUTO_TEST_CASE(a_waiters_subscription_follows_its_slot_to_another_shard_and_a_failover) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), cluster_node(cluster), fast_client_options());
    redlock::client waiter(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string resource = resource_of_shard(cluster, 0, "wandering");
    const auto slot = cluster.key_slot(resource);
    auto [ec, held] = co_await holder.async_acquire(resource, lock_for(30s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    patient_waiter w{waiter, resource, {}, {}};
    w.start(io);
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return shard_subscribers(cluster, cluster.master(0), resource) == 1; }, 10s));

    // The slot moves: the old master ends the subscription itself, and it is made on the new one.
    cluster.migrate_slot(slot, 1);
    BOOST_TEST(co_await eventually(
        [&] { return shard_subscribers(cluster, cluster.master(1), resource) == 1; }, 10s));
    BOOST_TEST(shard_subscribers(cluster, cluster.master(0), resource) == 0);

    // Its shard fails over. A shard's messages reach its replicas too, so the subscription may
    // stay on the old master, now a replica; it is still in the shard, and still hears.
    cluster.failover(1);
    const auto in_shard_1 = [&] {
      long long total = shard_subscribers(cluster, cluster.master(1), resource);
      for (const auto node : cluster.replicas(1))
        total += shard_subscribers(cluster, node, resource);
      return total;
    };
    BOOST_TEST(co_await eventually([&] { return in_shard_1() == 1; }, 15s));

    BOOST_TEST_REQUIRE(!w.waited.has_value(), w.waited->message() << ": " << w.won.diagnostics());
    co_await sleep_for(300ms);
    co_await w.woken_by_release_of(held);
  });
}

BOOST_AUTO_TEST_CASE(a_waiters_subscription_is_made_again_when_its_master_dies) {
  redis_cluster cluster;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), cluster_node(cluster), fast_client_options());
    redlock::client waiter(io.get_executor(), cluster_node(cluster), fast_client_options());
    const std::string resource = resource_of_shard(cluster, 1, "orphaned");
    auto [ec, held] = co_await holder.async_acquire(resource, lock_for(30s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    // Replicated before the master dies, so that the holder's release finds it on the new one.
    // Seen on the replica itself: a WAIT sent on the test's own connection would count the
    // replica at once, since WAIT waits for the writes of its connection, and that one made none.
    const auto replica = cluster.replicas(1).front();
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] {
          const auto copies = cluster.keys_on(replica);
          return std::find(copies.begin(), copies.end(), resource) != copies.end();
        },
        5s));
    patient_waiter w{waiter, resource, {}, {}};
    w.start(io);
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return shard_subscribers(cluster, cluster.master(1), resource) == 1; }, 10s));

    // The master is killed and its replica takes over: nothing is pushed, the link just breaks.
    const auto old_master = cluster.master(1);
    cluster.stop(old_master);
    cluster.failover(1);
    BOOST_TEST_REQUIRE(cluster.master(1) != old_master);
    const auto since_failover = steady_clock::now();
    BOOST_TEST(co_await eventually(
        [&] { return shard_subscribers(cluster, cluster.master(1), resource) == 1; }, 15s));
    BOOST_TEST_MESSAGE("subscribed on the new master " << ms_since(since_failover)
                                                       << " ms after the failover");
    BOOST_TEST_REQUIRE(!w.waited.has_value(), w.waited->message() << ": " << w.won.diagnostics());
    co_await sleep_for(300ms);
    // The holder's routes still name the dead master: its release, refused there unsent, waits
    // for the new topology and reaches the new master.
    co_await w.woken_by_release_of(held);
  });
}

BOOST_AUTO_TEST_CASE(a_tls_cluster_through_rediss_cluster_urls) {
  redlock::test::redis_cluster_options options;
  options.tls = true;
  redis_cluster cluster(3, 1, options);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto url = cluster.seed_url();
    BOOST_TEST_REQUIRE(url.starts_with("rediss+cluster://"), url);
    redlock::client locks(io.get_executor(), {redlock::node_config::from_url(url)},
                          fast_client_options());
    // The topology names each master's TLS port, and every shard is reached over TLS.
    for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
      const auto resource = resource_of_shard(cluster, shard, "tls");
      auto [ec, lease] = co_await locks.async_acquire(resource, lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
      BOOST_TEST(value_on(cluster, cluster.master(shard), resource) == lease.token());
      auto [release_ec] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST(!release_ec, release_ec.message());
    }
    BOOST_TEST(keys_on_masters(cluster) == 0);
  });
}

BOOST_AUTO_TEST_CASE(shutdown_releases_on_every_shard_and_closes_every_connection) {
  redis_cluster cluster;
  asio::io_context io;
  bool shut_down = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), cluster_node(cluster), fast_client_options());
        std::vector<redlock::lease> held;
        for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
          auto [ec, lease] = co_await locks.async_acquire(
              resource_of_shard(cluster, shard, "shutdown"), lock_for(30s), tuple_awaitable);
          BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
          held.push_back(std::move(lease));
        }
        BOOST_TEST(keys_on_masters(cluster) == 3);
        co_await locks.async_shutdown(tuple_awaitable);
        shut_down = true;
      },
      asio::detached);
  // Nothing of the client keeps the io_context busy once it is shut down and gone: no shard
  // connection, refresh or timer is left behind.
  const auto start = steady_clock::now();
  io.run_for(30s);
  BOOST_TEST(shut_down);
  BOOST_TEST(io.stopped(), "the io_context still had work after " << ms_since(start) << " ms");
  BOOST_TEST(keys_on_masters(cluster) == 0);
}

BOOST_AUTO_TEST_CASE(a_server_that_is_not_a_cluster_is_refused_by_name) {
  redis_fleet fleet(1);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto url = "redis+cluster://" + fleet.configs().front().address();
    redlock::client locks(io.get_executor(), {redlock::node_config::from_url(url)},
                          fast_client_options());
    auto [ec, lease] = co_await locks.async_try_acquire("nowhere", lock_for(5s), tuple_awaitable);
    BOOST_TEST(ec == error::wrong_node_kind, ec.message());
    BOOST_TEST(contains(lease.diagnostics(), "not a Redis Cluster node"), lease.diagnostics());
  });
}

BOOST_AUTO_TEST_SUITE_END()
