// Workload "one_node" of redlock_bench: the lock on one node against that server's own limit.
// Each run measures, on the first node, the server bound (workloads/server_bound.hpp: the pair's
// SET NX PX and release EVALSHA pipelined on a raw socket) and the lock's throughput (the
// throughput workload's loop with that node alone), in an order that alternates from run to run,
// and reports their ratio. Where the client costs less than the server per pair, the ratio nears 1.

#include "bench_support.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/server_bound.hpp"
#include "workloads/workloads.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlock::bench {

namespace {

// As many requests in flight as the throughput workload keeps.
constexpr std::size_t pipeline_depth = 256;

std::uint64_t pairs_for(bool quick) {
  return quick ? 2'000 : 40'000;
}

}  // namespace

run_result run_one_node(const run_context& context) {
  const int run = context.run;
  const std::vector<redlock::node_config> node{context.nodes.front()};
  const auto& first = node.front();
  if (first.kind != redlock::node_kind::standalone || first.tls.enabled ||
      !first.unix_path.empty() || !first.password.empty() || first.database != 0) {
    throw std::invalid_argument(
        "one_node measures the server bound on a raw socket: the first node must be a plain "
        "redis://host:port, without TLS, password or database");
  }
  std::vector<pid_t> pid;
  if (!context.server_pids.empty()) pid.push_back(context.server_pids.front());
  const std::uint64_t pairs = pairs_for(context.quick);

  run_result r;
  server_bound_result bound;
  throughput_measure lock;
  const auto measure_bound = [&] {
    bound = measure_server_bound(node.front(), key_prefix("one_node_bound", run),
                                 bench_client_options.release_channel, pairs, pipeline_depth);
    if (!bound.error.empty()) r.errors.add("server bound", {}, bound.error);
  };
  const auto measure_lock = [&] {
    lock = measure_throughput(node, pid, {pairs, pipeline_depth}, key_prefix("one_node", run),
                              fmt::format("one_node run {}", run), r.errors);
  };
  if (run % 2 == 0) {
    measure_bound();
    measure_lock();
  } else {
    measure_lock();
    measure_bound();
  }
  r.quorum = lock.quorum;
  r.nodes = 1;
  r.figures = throughput_figures(lock, "");
  r.figures.insert(r.figures.end(),
                   {
                       {"server_set_nx_px_per_s", bound.set_per_s, 0},
                       {"server_evalsha_per_s", bound.evalsha_per_s, 0},
                       {"server_bound_pairs_per_s", bound.pairs_per_s, 0},
                       {"lock_vs_server_bound",
                        bound.pairs_per_s > 0 ? r.figures.front().value / bound.pairs_per_s : 0, 2},
                       {"errors", static_cast<double>(r.errors.total()), 0},
                   });
  return r;
}

std::string one_node_params(bool quick) {
  return fmt::format("\"pairs\":{},\"inflight\":{},\"pipeline_depth\":{}", pairs_for(quick),
                     pipeline_depth, pipeline_depth);
}

}  // namespace redlock::bench
