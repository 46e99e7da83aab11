// Workload "cluster" of redlock_bench: what a Redis Cluster node costs against a standalone one.
// One cluster of three masters (no replicas: they would only take CPU from the masters on a small
// host) and one standalone server, each as the single Redlock node; the latency and throughput
// loops run on both, alternating which goes first from run to run. The latency loop takes one key
// (so one shard): the difference is the client's routing and its per-request bookkeeping. The
// throughput loop takes distinct keys, spread over the shards.
//
// On a host with fewer cores than shards the cluster cannot show scaling: its three servers share
// the cores the one standalone server has to itself. The workload always starts its own servers.

#include "bench_support.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_fleet.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/workloads.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

namespace redlock::bench {
namespace {

// The servers of the whole workload: started on its first run, kept for the others.
struct cluster_servers {
  redlock::test::redis_cluster cluster{3, 0};
  redlock::test::redis_fleet standalone{1};
  std::vector<redlock::node_config> cluster_node{
      redlock::node_config::from_url(cluster.seeds_url())};
  std::vector<redlock::node_config> standalone_node = standalone.configs();
  std::vector<pid_t> cluster_pids;
  std::vector<pid_t> standalone_pids;

  cluster_servers() {
    for (std::size_t node = 0; node < cluster.size(); ++node)
      cluster_pids.push_back(cluster.pid(node));
    standalone_pids.push_back(standalone[0].pid());
  }
};

cluster_servers& own_servers() {
  static cluster_servers servers;
  return servers;
}

}  // namespace

run_result run_cluster(const run_context& context) {
  if (context.server_pids.empty() && context.run == 0) {
    fmt::print(stderr,
               "redlock_bench: cluster: --nodes is not used; the workload starts a cluster and a "
               "standalone server of its own\n");
  }
  auto& servers = own_servers();
  const int run = context.run;
  const latency_sizes latency = latency_sizes_for(context.quick);
  const throughput_sizes throughput{context.quick ? 2'000u : 20'000u, 256};
  run_result r;

  struct side {
    lock_latency_state latency;
    throughput_measure throughput;
  } standalone, cluster;
  const auto measure = [&](bool on_cluster) {
    const auto& nodes = on_cluster ? servers.cluster_node : servers.standalone_node;
    const auto& pids = on_cluster ? servers.cluster_pids : servers.standalone_pids;
    side& into = on_cluster ? cluster : standalone;
    const std::string kind = on_cluster ? "cluster" : "standalone";
    into.latency = measure_lock_latency(nodes, latency, key_prefix("cluster-" + kind, run) + "lock",
                                        fmt::format("cluster run {} latency {}", run, kind),
                                        r.errors, kind + " ");
    into.throughput = measure_throughput(
        nodes, pids, throughput, key_prefix("cluster-" + kind, run),
        fmt::format("cluster run {} throughput {}", run, kind), r.errors, kind + " ");
  };
  // Alternating which goes first, so that a drift of the machine's state over a run does not
  // favour one side.
  measure(run % 2 == 1);
  measure(run % 2 == 0);

  r.quorum = 1;
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const auto p50 = [](const std::vector<double>& sample) { return percentile(sample, 0.5); };
  const auto rate = [](const throughput_measure& m) {
    return m.seconds > 0 ? static_cast<double>(m.pairs) / m.seconds : 0.0;
  };
  for (auto& f : lock_latency_figures(standalone.latency, "", "_standalone"))
    r.figures.push_back(std::move(f));
  for (auto& f : lock_latency_figures(cluster.latency, "", "_cluster"))
    r.figures.push_back(std::move(f));
  r.figures.push_back({"acquire_p50_cluster_vs_standalone",
                       ratio(p50(cluster.latency.acquire_us), p50(standalone.latency.acquire_us)),
                       2});
  for (auto& f : throughput_figures(standalone.throughput, "_standalone"))
    r.figures.push_back(std::move(f));
  for (auto& f : throughput_figures(cluster.throughput, "_cluster"))
    r.figures.push_back(std::move(f));
  r.figures.push_back({"throughput_cluster_vs_standalone",
                       ratio(rate(cluster.throughput), rate(standalone.throughput)), 2});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string cluster_params(bool quick) {
  const auto sizes = latency_sizes_for(quick);
  return fmt::format("\"iterations\":{},\"pairs\":{},\"inflight\":256,\"shards\":3",
                     sizes.iterations, quick ? 2'000 : 20'000);
}

}  // namespace redlock::bench
