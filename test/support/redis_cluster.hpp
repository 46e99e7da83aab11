#ifndef REDLOCK_TEST_SUPPORT_REDIS_CLUSTER_HPP
#define REDLOCK_TEST_SUPPORT_REDIS_CLUSTER_HPP

#include "redlock/node_config.hpp"
#include "resp/value.hpp"
#include "support/redis_fleet.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace redlock::test {

struct redis_cluster_options {
  // cluster-node-timeout: how long a node may stay silent before the others flag it as failing.
  // Small, so that an automatic failover in a test takes seconds; large enough that a busy
  // machine does not flag a healthy node.
  std::chrono::milliseconds node_timeout{2000};
  // requirepass and masterauth of every node (one word, URL-safe); the fixture's own connections
  // log in with it. Empty: no password.
  std::string password;
  // Every node also listens for TLS with shared_test_pki()'s server certificate, and the nodes
  // speak TLS to each other (tls-cluster, tls-replication), presenting its client certificate. The
  // plain port stays open for the fixture's own connections; a plain connection is told the nodes'
  // plain ports in CLUSTER SLOTS and redirections, a TLS connection their TLS ports.
  bool tls = false;
  // The bound on every wait of the fixture: the cluster forming, a failover, a node rejoining.
  std::chrono::milliseconds ready_timeout{30000};
};

// A real Redis Cluster of local redis-server processes (each a redis_server: free loopback port,
// a temporary directory of its own, no persistence, killed with the test process), for
// BOOST_FIXTURE_TEST_CASE(name, redis_cluster) or as a member.
//
// Nodes are numbered 0 .. size()-1 and keep their number for the fixture's lifetime. At first,
// node i (i < shards()) is shard i's master and node i + k * shards() (k = 1 .. replicas per
// master) its k-th replica. A shard is the fixed group of nodes that replicate each other: a
// failover changes which member is the master (master(shard), replicas(shard)), never which shard
// a node belongs to. (cluster-allow-replica-migration is off, so Redis never moves a replica to
// another master, nor turns a master that lost its last slot into a replica elsewhere.)
//
// Every wait is bounded by options.ready_timeout and polls; on timeout it throws
// std::runtime_error naming what was not ready, with the tail of every node's log. A command
// failing or answering with an error throws std::runtime_error naming the node, the command and
// the reply. Misuse (an unknown node, a failover of a shard without a live replica) throws
// std::logic_error. The destructor kills every process and removes their directories, also when
// the constructor throws.
//
// A node is *live* when it is running and not paused. The fixture never sends to a paused node
// on its own (that would only time out); it does send what a test asks with command().
class redis_cluster {
 public:
  static constexpr std::size_t slot_count = 16384;

  // Starts masters * (1 + replicas_per_master) nodes and forms the cluster: master i serves the
  // i-th of `masters` even contiguous slot ranges. Returns once the cluster is healthy (see
  // wait_until_healthy()).
  explicit redis_cluster(std::size_t masters = 3, std::size_t replicas_per_master = 1,
                         redis_cluster_options options = {});
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  // --- shape, as the fixture last saw it healthy
  std::size_t shards() const noexcept { return shards_.size(); }
  std::size_t size() const noexcept { return nodes_.size(); }
  std::size_t master(std::size_t shard) const;
  // The shard's other members, by node number.
  const std::vector<std::size_t>& replicas(std::size_t shard) const;
  std::size_t shard_of(std::size_t node) const;
  std::uint16_t master_port(std::size_t shard) const { return port(master(shard)); }
  pid_t master_pid(std::size_t shard) const { return pid(master(shard)); }

  // --- one node
  std::uint16_t port(std::size_t node) const;      // plain TCP
  std::uint16_t tls_port(std::size_t node) const;  // 0 without options.tls
  std::uint16_t bus_port(std::size_t node) const;  // the cluster bus (cluster-port)
  pid_t pid(std::size_t node) const;               // -1 while stopped
  bool running(std::size_t node) const;
  bool paused(std::size_t node) const;
  bool live(std::size_t node) const { return running(node) && !paused(node); }
  // The node's cluster id (CLUSTER MYID), which it keeps across restarts (nodes.conf).
  const std::string& id(std::size_t node) const;
  // "127.0.0.1:PORT", PORT being the port a client of the library connects to: the TLS port with
  // options.tls, else the plain one.
  std::string address(std::size_t node) const;
  std::vector<std::string> addresses() const;  // every node's, by node number
  // The node as one standalone Redlock node (password, and TLS trusting the test CA).
  node_config config(std::size_t node) const;
  // "redis+cluster://127.0.0.1:PORT" naming `node` as the seed (with ":password@" before the
  // host when there is a password; "rediss+cluster://...?ca=FILE" with options.tls).
  std::string seed_url(std::size_t node = 0) const;
  // The same, with every other node as a further seed ("&seed=127.0.0.1:PORT" ...).
  std::string seeds_url() const;
  std::string log_tail(std::size_t node, std::size_t lines = 20) const;

  // --- asked live
  // The node serving `slot`, from CLUSTER SLOTS on the first live node.
  std::size_t master_of_slot(std::size_t slot) const;
  // The same for every slot in one question: slot_count entries.
  std::vector<std::size_t> slot_owners() const;
  // CLUSTER KEYSLOT on the first live node.
  std::size_t key_slot(std::string_view key) const;
  // One command on `node`, logged in; an error reply is returned, not thrown. The node must be
  // running (a paused one answers only when resumed, or the call times out after 10 s).
  resp::value command(std::size_t node, std::span<const std::string_view> args) const;
  resp::value command(std::size_t node, std::initializer_list<std::string_view> args) const {
    return command(node, std::span<const std::string_view>(args.begin(), args.size()));
  }
  // Every key the node holds (KEYS *), sorted; a replica's are its copies.
  std::vector<std::string> keys_on(std::size_t node) const;
  long long dbsize(std::size_t node) const;
  // FLUSHALL on every live master, then waits until their live replicas are empty too.
  void flushall();

  // --- faults and administration
  void pause(std::size_t node);   // SIGSTOP, returns once the process has stopped
  void resume(std::size_t node);  // SIGCONT
  void stop(std::size_t node);    // SIGKILL, reaped; the port and directory are kept
  // Stops the node if it is running, starts it on the same port with the same nodes.conf (so it
  // rejoins as the same node, with an empty data set) and waits until the cluster is healthy.
  void restart(std::size_t node);

  // Waits until, as seen by every live node: cluster_state is ok; it knows all size() nodes and
  // none is still in handshake; no live node is flagged as failing; all nodes agree on every
  // slot's owner and on the role of every live node; every slot is owned by a live master, each
  // shard has at most one live master and its live replicas replicate that master, with
  // master_link_status:up. Then master() and replicas() follow what the nodes agreed on (a
  // failover Redis made on its own after stop() or pause() is adopted here).
  void wait_until_healthy();

  // Manual failover of `shard`: CLUSTER FAILOVER on its first live replica (FORCE if the master
  // is not live, which still needs the votes of a majority of all masters), sent again if Redis
  // gave it up, until that replica reports role:master and the cluster is healthy with it as the
  // shard's master and the old master, if live, as its replica.
  void failover(std::size_t shard);

  // Moves `slot` to shard `to_shard`'s master as redis-cli --cluster reshard does: the three
  // steps below in a row.
  void migrate_slot(std::size_t slot, std::size_t to_shard);
  // CLUSTER SETSLOT slot IMPORTING on the target, then MIGRATING on the slot's current master.
  // From here until finish_migration() the source answers ASK for keys it does not have.
  void begin_migration(std::size_t slot, std::size_t to_shard);
  // GETKEYSINSLOT and MIGRATE ... KEYS on the source until the slot is empty there; returns how
  // many keys it moved. May be called any number of times between begin and finish.
  std::size_t move_keys(std::size_t slot);
  // Moves the keys still left (written meanwhile), then CLUSTER SETSLOT slot NODE target on the
  // target, the source and every other live master, and waits until the cluster is healthy with
  // every live node agreeing that the target owns the slot.
  void finish_migration(std::size_t slot);

 private:
  struct node;
  struct shard {
    std::size_t master;
    std::vector<std::size_t> replicas;
  };
  struct migration {
    std::size_t source;
    std::size_t target;
  };

  node& at(std::size_t node);
  const node& at(std::size_t node) const;
  std::string describe(std::size_t node) const;
  std::vector<std::size_t> live_nodes() const;
  std::size_t first_live() const;
  std::size_t node_of_id(std::string_view id) const;  // npos when no node has it
  // command(), throwing on an error reply.
  resp::value checked(std::size_t node, std::span<const std::string_view> args) const;
  resp::value checked(std::size_t node, std::initializer_list<std::string_view> args) const {
    return checked(node, std::span<const std::string_view>(args.begin(), args.size()));
  }
  std::string info_field(std::size_t node, std::string_view section, std::string_view field) const;

  void form_cluster();
  // Empty when healthy (and then master()/replicas() are updated), else what is not.
  std::string health_problem();
  // Calls `problem` until it returns an empty string; throws at options_.ready_timeout.
  template <class Problem>
  void wait_until(std::string_view what, Problem problem);
  const migration& migration_of(std::size_t slot) const;

  redis_cluster_options options_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::vector<shard> shards_;
  std::vector<std::size_t> owners_;              // each slot's master, as last agreed
  std::map<std::size_t, migration> migrations_;  // by slot
};

}  // namespace redlock::test

#endif
