// Workload "slow_node" of redlock_bench.

#include "bench_support.hpp"
#include "support/chaos_proxy.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/workloads.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlock::bench {

namespace {

using namespace std::chrono_literals;
using redlock::test::chaos_proxy;

// slow_node: the latency workload's acquire + release, first with every node answering at once,
// then with the last node's replies delayed by 50 ms. A quorum of the others decides, so the slow
// node should not show in the acquire latency.

constexpr auto slow_delay = 50ms;
// A quorum that leaves one node out needs three nodes at least.
constexpr std::size_t min_nodes = 3;

// The proxy dials 127.0.0.1:port, whatever host the node was given as.
bool on_this_host(const redlock::node_config& node) {
  return node.host == "127.0.0.1" || node.host == "localhost";
}

std::vector<std::uint64_t> reply_bytes(const std::vector<std::unique_ptr<chaos_proxy>>& proxies) {
  std::vector<std::uint64_t> bytes;
  for (const auto& proxy : proxies)
    bytes.push_back(proxy->bytes_forwarded(chaos_proxy::direction::downstream));
  return bytes;
}

}  // namespace

run_result run_slow_node(const run_context& context) {
  const auto& nodes = context.nodes;
  if (nodes.size() < min_nodes) {
    throw std::runtime_error(fmt::format(
        "slow_node needs at least {} nodes (so that a quorum can leave the slow one out), got {}",
        min_nodes, nodes.size()));
  }
  for (const auto& node : nodes) {
    if (!on_this_host(node)) {
      throw std::runtime_error(fmt::format(
          "slow_node puts every node behind a local fault proxy, which can only forward to "
          "127.0.0.1; node {} is elsewhere (run slow_node without --nodes, or with nodes on "
          "127.0.0.1)",
          node.address()));
    }
  }

  // Both phases go through the proxies, the baseline with no delay: a proxy adds a hop (a copy
  // and a thread switch each way), and comparing a proxied slow phase with direct nodes would
  // charge that hop to the slow node. Each phase has a client of its own, so the slow phase does
  // not start with requests still queued from the baseline.
  std::vector<std::unique_ptr<chaos_proxy>> proxies;
  std::vector<redlock::node_config> proxied;
  for (const auto& node : nodes) {
    proxies.push_back(std::make_unique<chaos_proxy>(node.port));
    redlock::node_config via_proxy = node;  // keeps credentials and database
    via_proxy.host = "127.0.0.1";
    via_proxy.port = proxies.back()->port();
    proxied.push_back(via_proxy);
  }

  const latency_sizes sizes = latency_sizes_for(context.quick);
  const std::string prefix = key_prefix("slow_node", context.run);
  run_result r;
  const lock_latency_state baseline = measure_lock_latency(
      proxied, sizes, prefix + "baseline", fmt::format("slow_node run {}, no delay", context.run),
      r.errors, "baseline ");

  // Replies only (downstream): the node is 50 ms further away in round-trip time, as a node
  // behind a slow link would be. Delaying both directions would make that 100 ms, equal to the
  // default per-node deadline (node_timeout), and measure timeouts and reconnects instead of a
  // late but valid reply.
  proxies.back()->set_latency(chaos_proxy::direction::downstream, slow_delay);
  const std::vector<std::uint64_t> replied_before = reply_bytes(proxies);
  const lock_latency_state slow = measure_lock_latency(
      proxied, sizes, prefix + "slow",
      fmt::format("slow_node run {}, one node delayed", context.run), r.errors, "slow ");
  const std::vector<std::uint64_t> replied_after = reply_bytes(proxies);

  r.quorum = slow.quorum;
  r.figures = lock_latency_figures(slow, "", "");
  const auto baseline_figures = lock_latency_figures(baseline, "baseline_", "");
  r.figures.insert(r.figures.end(), baseline_figures.begin(), baseline_figures.end());
  const double slow_p50 = r.figures[0].value;
  const double baseline_p50 = baseline_figures[0].value;
  r.figures.push_back({"slow_vs_baseline", baseline_p50 > 0 ? slow_p50 / baseline_p50 : 0, 2});
  // A fast slow-phase p50 is only meaningful if the slow node kept taking part (late replies)
  // rather than being dropped as down after timeouts: its reply bytes against the others' mean,
  // about 1 when it answered everything (a few replies may still be in the proxy at the end).
  double others = 0;
  for (std::size_t i = 0; i + 1 < proxies.size(); ++i)
    others += static_cast<double>(replied_after[i] - replied_before[i]);
  others /= static_cast<double>(proxies.size() - 1);
  const auto slow_replied = static_cast<double>(replied_after.back() - replied_before.back());
  r.figures.push_back({"slow_node_reply_share", others > 0 ? slow_replied / others : 0, 2});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string slow_node_params(bool quick) {
  const latency_sizes sizes = latency_sizes_for(quick);
  return fmt::format(
      "\"warmup\":{},\"iterations\":{},\"delayed_node\":\"last\",\"delay_ms\":{},"
      "\"delay_direction\":\"downstream\"",
      sizes.warmup, sizes.iterations, slow_delay.count());
}

}  // namespace redlock::bench
