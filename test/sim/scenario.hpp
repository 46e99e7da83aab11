#ifndef REDLOCK_TEST_SIM_SCENARIO_HPP
#define REDLOCK_TEST_SIM_SCENARIO_HPP

// What one simulated run does, all of it decided before the run starts: the nodes and their
// clocks, the clients and their options, the network's manners, the operations each client runs
// and the faults injected. A scenario is generated from a seed with rapidcheck (so that a failing
// one shrinks to a smaller failing one) and printed as a history's first lines.

#include <cstdint>
#include <ostream>
#include <rapidcheck.h>
#include <string>
#include <vector>

namespace redlock::sim {

enum class op_kind : std::uint8_t {
  lock,       // client::async_acquire (waits)
  try_lock,   // client::async_try_acquire (one round)
  with_lock,  // redlock::with_lock
  mutex,      // redlock::mutex
  semaphore,  // redlock::semaphore
  rw_read,    // redlock::rw_lock, reading
  rw_write,   // redlock::rw_lock, writing
  set,        // client::async_acquire_all
};
const char* to_string(op_kind kind) noexcept;

// One operation of one client: acquire, hold (working in steps, each step a use of the lock while
// the lease says it is valid), maybe extend, then release.
struct operation {
  std::uint32_t client = 0;
  op_kind kind = op_kind::lock;
  // Index of the resource (r0, r1, ...), or for a set the first of `set_size` consecutive ones.
  std::uint32_t resource = 0;
  std::uint32_t set_size = 1;
  std::uint32_t permits = 2;  // semaphore
  std::uint32_t ttl_ms = 1000;
  std::uint32_t start_after_ms = 0;  // after the client's previous operation began (or the start)
  std::uint32_t hold_ms = 100;
  std::uint32_t steps = 3;
  bool fencing = false;
  bool auto_renew = true;
  std::uint32_t extend_ms = 0;        // not 0: an explicit extension to this TTL midway
  std::uint32_t cancel_after_ms = 0;  // not 0: the acquire is cancelled this long after it starts
  std::uint32_t wait_ms = 0;          // not 0: lock_options::wait
  bool concurrent = false;  // runs beside the client's next operations instead of before them
};

enum class fault_kind : std::uint8_t {
  pause,            // the node stops (SIGSTOP) for `duration_ms`
  restart_delayed,  // killed, back without keys after `duration_ms` (at least the longest TTL)
  restart_at_once,  // killed, back without keys after `duration_ms` (short): may break safety
  partition,        // `client` cannot reach `node` for `duration_ms`
  reset_links,      // every link between `client` and `node` reset
  script_flush,     // SCRIPT FLUSH on `node`
  stall_client,     // `client`'s event loop stops for `duration_ms` (a GC pause)
  shutdown_client,  // `client` shuts down (async_shutdown) and runs nothing more
  // On a sentinel-shaped node: its replica becomes master with the data the master had
  // `duration_ms` earlier (0: a replica that had everything); the former master turns replica
  // (keeping its connections, which READONLY answers) and the sentinel announces +switch-master.
  failover,
  // On a cluster-shaped node: the hash slot of one resource's keys (picked by `client`) moves to
  // the other shard with its keys, at once; the former owner answers MOVED, and its shard
  // channels' subscribers are unsubscribed.
  reshard,
  // On a cluster-shaped node: the master of shard `client` % 2 fails over to its replica (a new
  // server at a new address) with every write, or with those up to `duration_ms` before (a
  // lagging replica); the shards' map names the new master, and the former one, now its replica,
  // redirects its slots there (MOVED) and drops its shard channels' subscribers.
  shard_failover,
};
const char* to_string(fault_kind kind) noexcept;

struct fault {
  fault_kind kind = fault_kind::pause;
  std::uint32_t at_ms = 0;
  std::uint32_t node = 0;
  std::uint32_t client = 0;
  std::uint32_t duration_ms = 0;
};

struct scenario {
  std::uint64_t seed = 0;  // the network's delays, the library's tokens and jitter
  std::uint32_t nodes = 5;
  // The first this many nodes are sentinel-shaped: a master and a replica, and a sentinel that
  // names the master (node_kind::sentinel); the others are standalone servers.
  std::uint32_t sentinel_nodes = 0;
  // The next this many are cluster-shaped: a Redis Cluster of two masters, each serving half the
  // slots (node_kind::cluster).
  std::uint32_t cluster_nodes = 0;
  std::uint32_t clients = 3;
  std::uint32_t resources = 2;
  std::vector<std::int32_t> node_drift_ppm;  // each node's clock rate, in parts per million
  std::uint32_t node_timeout_ms = 50;
  std::uint32_t delay_high_us = 400;  // one-way delays are uniform in [50 us, this]
  std::uint32_t late_permille = 0;    // chance of a late message, per mille
  std::uint32_t late_most_ms = 0;     // how late it may be
  std::uint32_t reset_after_execute_permille = 0;
  // Not 0: late messages and resets after execution stop at this instant, so that the rest of the
  // run can be judged for promptness (checkers.hpp, calm_from); 0: they go on to the end.
  std::uint32_t network_calm_ms = 0;
  // Not 0: the library's renewal ticks are this long (renewal_tick_ms_for_tests), so that
  // concurrent leases of a client renew in one batch far more often than by chance.
  std::uint32_t renewal_tick_ms = 0;
  std::vector<operation> operations;
  std::vector<fault> faults;

  // The end of the last fault (0 without faults).
  std::uint32_t faults_end_ms() const;
  std::uint32_t longest_ttl_ms() const;
};

std::ostream& operator<<(std::ostream& os, const operation& op);
std::ostream& operator<<(std::ostream& os, const fault& f);
std::ostream& operator<<(std::ostream& os, const scenario& s);

// Which lock kinds, faults and sizes a run may draw (redlock_sim --kinds, --faults).
struct scenario_space {
  std::vector<op_kind> kinds{op_kind::lock,     op_kind::try_lock,  op_kind::with_lock,
                             op_kind::mutex,    op_kind::semaphore, op_kind::rw_read,
                             op_kind::rw_write, op_kind::set};
  std::vector<fault_kind> faults{
      fault_kind::pause,        fault_kind::restart_delayed, fault_kind::restart_at_once,
      fault_kind::partition,    fault_kind::reset_links,     fault_kind::script_flush,
      fault_kind::stall_client, fault_kind::shutdown_client, fault_kind::failover,
      fault_kind::reshard,      fault_kind::shard_failover};
  std::uint32_t most_operations = 200;  // about 100 a history
  std::uint32_t most_faults = 4;
  bool network_faults = true;  // late messages, resets after execution
};

rc::Gen<scenario> scenario_generator(const scenario_space& space);

}  // namespace redlock::sim

#endif
