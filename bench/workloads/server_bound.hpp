// What one Redis server can do for the lock with no client logic in the way: the commands of an
// acquire + release pair (a plain `SET key token NX PX ttl`, then the library's token-checked
// release script by EVALSHA), pipelined on one blocking socket in batches of `depth`, the next
// batch always sent before the last one's replies are read, so that the server never waits: what
// redis-benchmark -P with several connections drives a server to. The lock's pairs/s on that node
// divided by this bound is how close the client brings the server to its limit.

#ifndef REDLOCK_BENCH_WORKLOADS_SERVER_BOUND_HPP
#define REDLOCK_BENCH_WORKLOADS_SERVER_BOUND_HPP

#include "redlock/node_config.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace redlock::bench {

struct server_bound_result {
  double set_per_s = 0;      // SET NX PX on fresh keys
  double evalsha_per_s = 0;  // the release script on those keys, each still held
  // Pairs of the two a second: 1 / (1 / set_per_s + 1 / evalsha_per_s).
  double pairs_per_s = 0;
  std::string error;  // empty, or why the figures are missing
};

// `node`: plain TCP, no AUTH. Keys are `key_prefix` + a number, with a 10 s TTL, all released at
// the end. `release_channel`: the announcement channel the client's release names ('' for none),
// so that the script publishes exactly as the lock's releases do.
server_bound_result measure_server_bound(const redlock::node_config& node,
                                         const std::string& key_prefix,
                                         const std::string& release_channel, std::uint64_t pairs,
                                         std::size_t depth);

}  // namespace redlock::bench

#endif
