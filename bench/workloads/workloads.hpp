// The workloads of redlock_bench, one file each; main() lists them in its table.
#ifndef REDLOCK_BENCH_WORKLOADS_HPP
#define REDLOCK_BENCH_WORKLOADS_HPP

#include "bench_support.hpp"
#include "redlock/node_config.hpp"

#include <string>
#include <vector>

namespace redlock::bench {

// One caller, sequential acquire + release on one key; plain SET and a SET fan-out beside it.
run_result run_latency(const run_context& context);
std::string latency_params(bool quick);

// Distinct keys, 256 coroutines in flight, try_acquire + release pairs.
run_result run_throughput(const run_context& context);
std::string throughput_params(bool quick);

// Contenders in one client on one key, each doing a slow read-modify-write of a witness counter.
run_result run_contention(const run_context& context);
std::string contention_params(bool quick);

// latency with every node behind a proxy, without and then with the last node's replies delayed
// by 50 ms: a quorum of the others should decide without it.
run_result run_slow_node(const run_context& context);
std::string slow_node_params(bool quick);

// throughput at 1 .. 1024 in flight, and latency on 1, 3, 5 and 7 nodes.
run_result run_scale_curve(const run_context& context);
std::string scale_curve_params(bool quick);

// Many leases held at once with auto-renewal: client CPU and memory while only renewals run.
run_result run_renewal_scale(const run_context& context);
std::string renewal_scale_params(bool quick);

// contention's 16 contenders and 1 ms hold on a semaphore of 1, 4 and 16 permits, and contention
// itself in the same run: acquisitions/s and waits of each, permits 1 against the mutex.
run_result run_semaphore(const run_context& context);
std::string semaphore_params(bool quick);

// contention's 16 contenders on a redlock::rw_lock, 90 % and then 50 % of the acquires reads (a
// reader holds 1 ms, a writer makes contention's slow increment), and contention in the same run.
run_result run_rw_lock(const run_context& context);
std::string rw_lock_params(bool quick);

// Sets of 1, 2 and 4 locks (client::async_acquire_all) against single locks taken one after
// another in sorted order: uncontended latency and throughput, and 16 contenders over 32
// resources taking random sets of 2 and 4.
run_result run_multi(const run_context& context);
std::string multi_params(bool quick);

// 4 processes x 4 contenders on one key, one client per process: throughput, waits, fairness.
run_result run_contention_procs(const run_context& context);
std::string contention_procs_params(bool quick);

// latency, throughput and connect time over plain TCP and over TLS. Without --nodes, on five
// servers of its own that listen for both; with --nodes, over TLS on its rediss:// nodes and over
// plain TCP on the others (the plain side and the ratios left out when there are none).
run_result run_tls(const run_context& context);
std::string tls_params(bool quick);

// Why workload tls cannot run on the nodes of --nodes (none of them is a rediss:// node), or an
// empty string when it can. run_tls throws std::invalid_argument with this message.
std::string tls_nodes_problem(const std::vector<redlock::node_config>& given);

// A release in one client, the acquisition of its waiter in another: with release announcements
// and without, against one uncontended acquire.
run_result run_wake_latency(const run_context& context);
std::string wake_latency_params(bool quick);

// latency and throughput on a Redis Cluster of three masters as the one node, against one
// standalone server, on servers of its own (--nodes is not used).
run_result run_cluster(const run_context& context);
std::string cluster_params(bool quick);

// throughput with the first node alone, against that server's bound measured in the same run
// (pipelined SET NX PX and release EVALSHA on a raw socket); their ratio is lock_vs_server_bound.
run_result run_one_node(const run_context& context);
std::string one_node_params(bool quick);

}  // namespace redlock::bench

#endif
