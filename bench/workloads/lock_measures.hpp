// The measuring loops of "latency" and "throughput", with the node list and the in-flight count
// as parameters, so that other workloads (slow_node, scale_curve) measure exactly the same way.
#ifndef REDLOCK_BENCH_WORKLOADS_LOCK_MEASURES_HPP
#define REDLOCK_BENCH_WORKLOADS_LOCK_MEASURES_HPP

#include "bench_support.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace redlock::bench {

struct latency_sizes {
  int warmup;
  int iterations;
};

latency_sizes latency_sizes_for(bool quick);

// One caller, sequential acquire + release on one key: what it measured, and where it stood.
struct lock_latency_state {
  std::string stage = "starting";
  int iteration = 0;
  std::size_t quorum = 0;
  std::vector<double> acquire_us, release_us;  // warm-up excluded; release only when it succeeded
  // heap allocations during the measured (not warm-up) iterations, on every thread
  std::uint64_t allocations = 0;
};

// The acquire + release loop of "latency", with a client of its own over `nodes`. Failures go to
// `errors` as operations "acquire" and "release", each preceded by `label` (which tells the
// phases of one run apart when they share a tally).
asio::awaitable<void> lock_latency_loop(const std::vector<redlock::node_config>& nodes,
                                        latency_sizes sizes, std::string key,
                                        lock_latency_state& st, error_tally& errors,
                                        std::string label = {});

// For the watchdog's failure message.
std::string describe_progress(const lock_latency_state& st, const error_tally& errors);

// lock_latency_loop alone, on an io_context of its own under the watchdog.
lock_latency_state measure_lock_latency(const std::vector<redlock::node_config>& nodes,
                                        latency_sizes sizes, std::string key, std::string_view what,
                                        error_tally& errors, std::string label = {});

// acquire_p50_us, acquire_p99_us, release_p50_us, release_p99_us, each named
// before + name + after.
std::vector<figure> lock_latency_figures(const lock_latency_state& st, std::string_view before,
                                         std::string_view after);

struct throughput_sizes {
  std::uint64_t pairs;
  std::size_t inflight;
};

// Distinct keys, `inflight` coroutines sharing one client, try_acquire + release pairs.
struct throughput_measure {
  std::size_t quorum = 0;
  std::uint64_t pairs = 0;
  double seconds = 0;
  double cpu = 0;                 // this process
  bool own_nodes = false;         // server_cpu is meaningful
  double server_cpu = 0;          // the redis-server children given as server_pids
  std::uint64_t allocations = 0;  // heap allocations while the pairs ran
  // Heap allocations while the second half of the pairs ran: the steady state, once the
  // connections' request pools and queues have grown to what `inflight` needs.
  std::uint64_t steady_allocations = 0;
};

// server_pids: our own nodes' processes, whose CPU time is measured too; empty with --nodes.
// Failures go to `errors` as operations "try_acquire" and "release", preceded by `label`.
throughput_measure measure_throughput(const std::vector<redlock::node_config>& nodes,
                                      const std::vector<pid_t>& server_pids, throughput_sizes sizes,
                                      std::string prefix, std::string_view what,
                                      error_tally& errors, const std::string& label = {});

// pairs_per_s, client_cpu_us_per_pair, allocations_per_pair and steady_allocations_per_pair (the
// second half's), and with own nodes
// server_cpu_us_per_pair and client_share_of_cpu; each named name + after.
std::vector<figure> throughput_figures(const throughput_measure& m, std::string_view after);

}  // namespace redlock::bench

#endif
