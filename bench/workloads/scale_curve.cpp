// Workload "scale_curve" of redlock_bench.

#include "bench_support.hpp"
#include "support/redis_fleet.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/workloads.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace redlock::bench {

namespace {

// scale_curve: how the cost grows with the work in flight (the throughput workload at several
// in-flight counts, on all the nodes) and with the number of nodes (the latency workload's
// acquire + release on the first N nodes).

constexpr std::array<std::size_t, 5> inflight_levels{1, 16, 64, 256, 1024};
constexpr std::array<std::size_t, 4> node_counts{1, 3, 5, 7};

std::uint64_t pairs_per_level(bool quick) {
  return quick ? 2'000 : 20'000;
}

std::string joined(const auto& values) {
  return fmt::format("[{}]", fmt::join(values, ","));
}

}  // namespace

run_result run_scale_curve(const run_context& context) {
  const int run = context.run;
  const std::string prefix = key_prefix("scale_curve", run);
  run_result r;

  for (const std::size_t inflight : inflight_levels) {
    const throughput_measure m = measure_throughput(
        context.nodes, context.server_pids, {pairs_per_level(context.quick), inflight},
        fmt::format("{}at{}:", prefix, inflight),
        fmt::format("scale_curve run {}, {} in flight", run, inflight), r.errors,
        fmt::format("{} in flight: ", inflight));
    r.quorum = m.quorum;
    const auto figures = throughput_figures(m, fmt::format("_at_{}", inflight));
    r.figures.insert(r.figures.end(), figures.begin(), figures.end());
  }

  // Our own fleet has five nodes; the largest N needs more, started here for this run only. With
  // --nodes the nodes are not ours to add to: an N beyond them is left out.
  std::vector<redlock::node_config> nodes = context.nodes;
  std::vector<std::unique_ptr<redlock::test::redis_server>> extra;
  const bool own_nodes = !context.server_pids.empty();
  while (own_nodes && nodes.size() < node_counts.back()) {
    extra.push_back(std::make_unique<redlock::test::redis_server>());
    nodes.push_back(extra.back()->config());
  }
  const latency_sizes sizes = latency_sizes_for(context.quick);
  for (const std::size_t n : node_counts) {
    if (n > nodes.size()) {
      if (run == 0) {
        fmt::print(stderr,
                   "redlock_bench: scale_curve: latency at {} nodes left out: --nodes gives {}\n",
                   n, nodes.size());
      }
      continue;
    }
    const std::vector<redlock::node_config> first_n(nodes.begin(),
                                                    nodes.begin() + static_cast<std::ptrdiff_t>(n));
    const lock_latency_state st =
        measure_lock_latency(first_n, sizes, fmt::format("{}n{}:lock", prefix, n),
                             fmt::format("scale_curve run {}, {} nodes", run, n), r.errors,
                             fmt::format("{} nodes: ", n));
    const auto figures = lock_latency_figures(st, "", fmt::format("_n{}", n));
    r.figures.insert(r.figures.end(), figures.begin(), figures.end());
  }

  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string scale_curve_params(bool quick) {
  const latency_sizes sizes = latency_sizes_for(quick);
  return fmt::format(
      "\"pairs_per_level\":{},\"inflight_levels\":{},\"warmup\":{},\"iterations\":{},"
      "\"latency_node_counts\":{}",
      pairs_per_level(quick), joined(inflight_levels), sizes.warmup, sizes.iterations,
      joined(node_counts));
}

}  // namespace redlock::bench
