// The redis_cluster fixture (support/redis_cluster.hpp) against real redis-server processes: it
// forms a cluster of three shards whose masters cover every slot, keeps keys on the masters that
// own their slots, fails a shard over to its replica, moves a slot with its keys (in steps, and in
// one call), pauses a node, brings a stopped master back on its port, and does the same with a
// password and TLS between the nodes. Each case logs how long the fixture's steps took.

#include "integration/prelude.hpp"
#include "support/redis_cluster.hpp"
#include "support/sync_client.hpp"
#include "support/test_pki.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using redlock::test::redis_cluster;

bool contains(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// "127.0.0.1:PORT" of `node`'s plain port: what a plain connection is redirected to.
std::string plain_address(const redis_cluster& cluster, std::size_t node) {
  return "127.0.0.1:" + std::to_string(cluster.port(node));
}

// The reply of a node that does not serve the slot: "MOVED <slot> <address>".
std::string moved(std::size_t slot, const std::string& address) {
  return "MOVED " + std::to_string(slot) + " " + address;
}

// A key whose slot `shard` serves, found by asking the cluster (CLUSTER KEYSLOT).
std::string key_of_shard(const redis_cluster& cluster, std::size_t shard, const std::string& stem) {
  for (int i = 0; i < 1000; ++i) {
    const std::string key = stem + ":" + std::to_string(i);
    if (cluster.master_of_slot(cluster.key_slot(key)) == cluster.master(shard)) return key;
  }
  throw std::runtime_error("no key of shard " + std::to_string(shard) + " among 1000");
}

std::string get(const redis_cluster& cluster, std::size_t node, const std::string& key) {
  return cluster.command(node, {"GET", key}).text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster)

BOOST_AUTO_TEST_CASE(forms_three_shards_whose_masters_cover_every_slot) {
  const auto start = steady_clock::now();
  redis_cluster cluster;
  BOOST_TEST_MESSAGE("3 masters + 3 replicas formed and healthy in " << ms_since(start) << " ms");

  BOOST_TEST_REQUIRE(cluster.shards() == 3u);
  BOOST_TEST_REQUIRE(cluster.size() == 6u);
  std::set<std::uint16_t> ports;
  std::set<pid_t> pids;
  for (std::size_t node = 0; node < cluster.size(); ++node) {
    ports.insert(cluster.port(node));
    ports.insert(cluster.bus_port(node));
    pids.insert(cluster.pid(node));
    BOOST_TEST(cluster.pid(node) > 0);
    BOOST_TEST(cluster.id(node).size() == 40u);
    BOOST_TEST(cluster.address(node) == plain_address(cluster, node));
  }
  BOOST_TEST(ports.size() == 12u);
  BOOST_TEST(pids.size() == 6u);
  BOOST_TEST(cluster.addresses().size() == 6u);
  BOOST_TEST(cluster.seed_url() == "redis+cluster://" + plain_address(cluster, 0));

  // 16384 slots, each served by one of three distinct masters, in three even ranges.
  const std::vector<std::size_t> owners = cluster.slot_owners();
  BOOST_TEST_REQUIRE(owners.size() == redis_cluster::slot_count);
  const std::set<std::size_t> masters(owners.begin(), owners.end());
  BOOST_TEST(masters == (std::set<std::size_t>{0, 1, 2}));
  for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
    BOOST_TEST_CONTEXT("shard " << shard) {
      BOOST_TEST(cluster.master(shard) == shard);
      BOOST_TEST(cluster.master_port(shard) == cluster.port(shard));
      BOOST_TEST(cluster.master_pid(shard) == cluster.pid(shard));
      BOOST_TEST(cluster.replicas(shard) == (std::vector<std::size_t>{shard + 3}));
      BOOST_TEST(cluster.shard_of(shard + 3) == shard);
      BOOST_TEST(owners[shard * 16384 / 3] == shard);
      BOOST_TEST(owners[(shard + 1) * 16384 / 3 - 1] == shard);
      const std::string info = cluster.command(shard + 3, {"INFO", "replication"}).text;
      BOOST_TEST(info.find("role:slave") != std::string::npos, info);
      BOOST_TEST(
          info.find("master_port:" + std::to_string(cluster.port(shard))) != std::string::npos,
          info);
    }
  }
  BOOST_TEST(cluster.master_of_slot(0) == 0u);
  BOOST_TEST(cluster.master_of_slot(16383) == 2u);

  // Keys go to the master of their slot, which the other masters redirect to; replicas copy them.
  for (const std::string key : {"user:1", "user:2", "order:7", "{job}:a", "{job}:b"}) {
    BOOST_TEST_CONTEXT("key " << key) {
      const std::size_t slot = cluster.key_slot(key);
      const std::size_t owner = cluster.master_of_slot(slot);
      sync_client client(cluster.port(owner));
      BOOST_TEST(client.command({"SET", key, "v-" + key}).text == "OK");
      BOOST_TEST(contains(cluster.keys_on(owner), key));
      const std::size_t other = (owner + 1) % cluster.shards();
      BOOST_TEST(cluster.command(other, {"SET", key, "x"}).text ==
                 moved(slot, plain_address(cluster, owner)));
      const std::size_t replica = cluster.replicas(cluster.shard_of(owner)).front();
      BOOST_TEST(redlock::test::eventually_blocking(
          [&] { return contains(cluster.keys_on(replica), key); }, 10s));
    }
  }
  BOOST_TEST(cluster.key_slot("{job}:a") == cluster.key_slot("{job}:b"));
  long long total = 0;
  for (std::size_t shard = 0; shard < cluster.shards(); ++shard) {
    total += cluster.dbsize(cluster.master(shard));
  }
  BOOST_TEST(total == 5);
}

BOOST_AUTO_TEST_CASE(failover_of_shard_0_hands_its_slots_to_the_replica) {
  redis_cluster cluster;
  const std::size_t old_master = cluster.master(0);
  const std::size_t replica = cluster.replicas(0).front();
  const std::string key = key_of_shard(cluster, 0, "failover");
  const std::size_t slot = cluster.key_slot(key);
  BOOST_TEST_REQUIRE(cluster.command(old_master, {"SET", key, "before"}).text == "OK");

  const auto start = steady_clock::now();
  cluster.failover(0);
  BOOST_TEST_MESSAGE("failover of shard 0 done and the cluster healthy in " << ms_since(start)
                                                                            << " ms");

  BOOST_TEST(cluster.master(0) == replica);
  BOOST_TEST(cluster.replicas(0) == std::vector<std::size_t>{old_master});
  BOOST_TEST(cluster.master_of_slot(slot) == replica);
  BOOST_TEST(cluster.master_of_slot(0) == replica);
  // A manual failover waits for the replica to catch up: the key is there, and writable.
  BOOST_TEST(get(cluster, replica, key) == "before");
  BOOST_TEST(cluster.command(replica, {"SET", key, "after"}).text == "OK");
  BOOST_TEST(cluster.command(old_master, {"GET", key}).text ==
             moved(slot, plain_address(cluster, replica)));
  const std::string info = cluster.command(old_master, {"INFO", "replication"}).text;
  BOOST_TEST(info.find("role:slave") != std::string::npos, info);
}

BOOST_AUTO_TEST_CASE(migrating_a_slot_moves_its_keys_in_steps_or_at_once) {
  redis_cluster cluster;
  const std::string first = "migrate:{m}:1";
  const std::string second = "migrate:{m}:2";
  const std::size_t slot = cluster.key_slot(first);
  BOOST_TEST_REQUIRE(cluster.key_slot(second) == slot);
  const std::size_t source = cluster.master_of_slot(slot);
  const std::size_t from = cluster.shard_of(source);
  const std::size_t to = (from + 1) % cluster.shards();
  const std::size_t target = cluster.master(to);
  BOOST_TEST_REQUIRE(cluster.command(source, {"SET", first, "one"}).text == "OK");
  BOOST_TEST_REQUIRE(cluster.command(source, {"SET", second, "two"}).text == "OK");
  const std::string ask = "ASK " + std::to_string(slot) + " " + plain_address(cluster, target);

  // Begun: the source still serves the keys it has, and sends a new key to the target.
  auto start = steady_clock::now();
  cluster.begin_migration(slot, to);
  BOOST_TEST(get(cluster, source, first) == "one");
  BOOST_TEST(get(cluster, source, "migrate:{m}:new") == ask);

  // Keys moved: the source sends them to the target, which serves them after ASKING.
  BOOST_TEST(cluster.move_keys(slot) == 2u);
  BOOST_TEST(!contains(cluster.keys_on(source), first));
  BOOST_TEST(get(cluster, source, first) == ask);
  {
    sync_client client(cluster.port(target));
    BOOST_TEST(client.command({"ASKING"}).text == "OK");
    BOOST_TEST(client.command({"GET", second}).text == "two");
  }

  // Finished: the target owns the slot in every node's view, and the source redirects for good.
  cluster.finish_migration(slot);
  BOOST_TEST_MESSAGE("slot " << slot << " migrated in steps in " << ms_since(start) << " ms");
  BOOST_TEST(cluster.master_of_slot(slot) == target);
  BOOST_TEST(get(cluster, target, first) == "one");
  BOOST_TEST(get(cluster, source, second) == moved(slot, plain_address(cluster, target)));
  BOOST_TEST(cluster.keys_on(target) == (std::vector<std::string>{first, second}));

  // And back in one call.
  start = steady_clock::now();
  cluster.migrate_slot(slot, from);
  BOOST_TEST_MESSAGE("slot " << slot << " migrated back in " << ms_since(start) << " ms");
  BOOST_TEST(cluster.master_of_slot(slot) == source);
  BOOST_TEST(cluster.keys_on(source) == (std::vector<std::string>{first, second}));
  BOOST_TEST(cluster.dbsize(target) == 0);
  BOOST_TEST(get(cluster, source, second) == "two");

  BOOST_CHECK_THROW(cluster.move_keys(slot), std::logic_error);
  BOOST_CHECK_THROW(cluster.begin_migration(slot, from), std::logic_error);
}

BOOST_AUTO_TEST_CASE(a_stopped_master_restarts_on_its_port_and_rejoins) {
  redis_cluster cluster;

  // A paused node answers nothing until resumed.
  const std::size_t replica = cluster.replicas(2).front();
  cluster.pause(replica);
  BOOST_TEST(!cluster.live(replica));
  BOOST_CHECK_THROW(sync_client(cluster.port(replica), {}, {}, 300ms).command({"PING"}),
                    std::runtime_error);
  cluster.resume(replica);
  BOOST_TEST(cluster.command(replica, {"PING"}).text == "PONG");

  const std::size_t node = cluster.master(1);
  const std::uint16_t port = cluster.port(node);
  const pid_t old_pid = cluster.pid(node);
  const std::string key = key_of_shard(cluster, 1, "restart");
  cluster.stop(node);
  BOOST_TEST(!cluster.running(node));
  BOOST_TEST(cluster.pid(node) == -1);
  BOOST_CHECK_THROW(sync_client(port, {}, {}, 1s), std::runtime_error);

  const auto start = steady_clock::now();
  cluster.restart(node);
  BOOST_TEST_MESSAGE("master of shard 1 restarted and the cluster healthy in " << ms_since(start)
                                                                               << " ms");
  BOOST_TEST(cluster.running(node));
  BOOST_TEST(cluster.port(node) == port);
  BOOST_TEST(cluster.pid(node) != old_pid);
  BOOST_TEST(cluster.shard_of(node) == 1u);
  // Normally still the master; had the restart taken longer than a failover, its replica took
  // over and the node came back as the replica. Either way the shard serves its slots.
  const std::size_t now_master = cluster.master(1);
  BOOST_TEST((now_master == node || cluster.replicas(1) == std::vector<std::size_t>{node}));
  const std::size_t slot = cluster.key_slot(key);
  BOOST_TEST(cluster.master_of_slot(slot) == now_master);
  BOOST_TEST(cluster.command(now_master, {"SET", key, "back"}).text == "OK");

  cluster.flushall();
  for (std::size_t n = 0; n < cluster.size(); ++n) {
    BOOST_TEST(cluster.dbsize(n) == 0);
  }
}

BOOST_AUTO_TEST_CASE(forms_with_a_password_and_tls_between_the_nodes) {
  redlock::test::redis_cluster_options options;
  options.password = "cluster-secret";
  options.tls = true;
  const auto start = steady_clock::now();
  redis_cluster cluster(3, 1, options);
  BOOST_TEST_MESSAGE("3 masters + 3 replicas over TLS formed and healthy in " << ms_since(start)
                                                                              << " ms");

  const std::size_t master = cluster.master(1);
  const std::string tls_address = "127.0.0.1:" + std::to_string(cluster.tls_port(master));
  BOOST_TEST(cluster.tls_port(master) != 0);
  BOOST_TEST(cluster.address(master) == tls_address);
  BOOST_TEST(cluster.seed_url(master) ==
             "rediss+cluster://:cluster-secret@" + tls_address +
                 "?ca=" + redlock::test::shared_test_pki().ca().string());
  BOOST_TEST(cluster.config(master).tls.enabled);
  BOOST_TEST(cluster.config(master).password == "cluster-secret");
  // Without the password a node refuses; replication runs over TLS, to the master's TLS port.
  BOOST_TEST(sync_client(cluster.port(master)).command({"GET", "k"}).text.starts_with("NOAUTH"));
  const std::string info =
      cluster.command(cluster.replicas(1).front(), {"INFO", "replication"}).text;
  BOOST_TEST(
      info.find("master_port:" + std::to_string(cluster.tls_port(master))) != std::string::npos,
      info);

  // MIGRATE logs in and speaks TLS to the target; a failover needs the replicas' TLS links.
  const std::string key = key_of_shard(cluster, 1, "secret");
  const std::size_t slot = cluster.key_slot(key);
  BOOST_TEST_REQUIRE(cluster.command(master, {"SET", key, "v"}).text == "OK");
  cluster.migrate_slot(slot, 2);
  BOOST_TEST(cluster.keys_on(cluster.master(2)) == std::vector<std::string>{key});
  cluster.failover(2);
  BOOST_TEST(cluster.master_of_slot(slot) == cluster.master(2));
  BOOST_TEST(get(cluster, cluster.master(2), key) == "v");
}

BOOST_AUTO_TEST_SUITE_END()
