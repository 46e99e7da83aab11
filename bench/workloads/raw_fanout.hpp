// The floor under the lock's latency: the same SET fanned out to every node and decided at a
// majority of replies, written as plainly as it can be (blocking sockets, poll(2), OpenSSL's
// SSL_read/SSL_write called directly; no Asio, no parser, no lock logic). What the machine and the
// servers cost, so that the lock's figures can be read against it.

#ifndef REDLOCK_BENCH_RAW_FANOUT_HPP
#define REDLOCK_BENCH_RAW_FANOUT_HPP

#include "redlock/node_config.hpp"

#include <string>
#include <vector>

namespace redlock::bench {

// A blocking TCP socket connected to `node` (TCP_NODELAY), or -1 with `error` saying why. The
// caller closes it.
int connect_raw_tcp(const redlock::node_config& node, std::string& error);

struct raw_fanout_result {
  std::vector<double> decided_us;  // one sample per fan-out: send of the first SET to the majority
  std::string error;               // empty, or what stopped the loop (the samples so far stand)
};

// `nodes` are all TCP or all TLS over TCP (no Unix sockets, no AUTH). TLS nodes are verified
// against their ca_file as the library would, so the handshake costs the same; only the loop after
// it is measured. `warmup` fan-outs are not sampled. Keys are `key_prefix` + a number, set with a
// 10 s TTL.
raw_fanout_result measure_raw_fanout(const std::vector<redlock::node_config>& nodes,
                                     const std::string& key_prefix, int iterations, int warmup);

}  // namespace redlock::bench

#endif
