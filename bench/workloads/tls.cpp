// Workload "tls" of redlock_bench: what TLS costs. The latency and throughput loops run over plain
// TCP and over TLS, alternating which goes first from run to run, and connects are timed from the
// first byte to a usable connection.
//
// Without --nodes it starts five servers of its own that listen both for plain RESP and for TLS
// (certificates made with the openssl command line, support/test_pki.hpp), so that the two sides
// differ in TLS only. With --nodes it measures those nodes: the rediss:// ones over TLS, the others
// over plain TCP (list each server twice, by its plain and by its TLS port, for a like-for-like
// comparison). Without a plain node the plain side and the ratios are left out; a list without a
// rediss:// node is refused (tls_nodes_problem).

#include "bench_support.hpp"
#include "lock_handshake.hpp"
#include "net/connection.hpp"
#include "resp/encoder.hpp"
#include "support/redis_fleet.hpp"
#include "support/test_pki.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/raw_fanout.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlock::bench {
namespace {

// The servers of the whole workload: started on its first run, kept for the others.
struct tls_fleet {
  redlock::test::redis_fleet fleet;
  std::vector<redlock::node_config> plain;
  std::vector<redlock::node_config> tls;
  std::vector<pid_t> pids;

  static redlock::test::redis_server_options options() {
    const auto& pki = redlock::test::shared_test_pki();
    redlock::test::redis_server_options o;
    o.tls = redlock::test::redis_server_options::tls_listener{
        pki.server().cert.string(), pki.server().key.string(), pki.ca().string(), false};
    return o;
  }

  tls_fleet() : fleet(5, options()) {
    plain = fleet.configs();
    tls = fleet.tls_configs(redlock::test::shared_test_pki().ca().string());
    for (std::size_t i = 0; i < fleet.size(); ++i)
      pids.push_back(fleet[i].pid());
  }
};

tls_fleet& own_fleet() {
  static tls_fleet fleet;
  return fleet;
}

// The nodes of each side. An empty side is left out.
struct node_sets {
  std::vector<redlock::node_config> plain;
  std::vector<redlock::node_config> tls;
  std::vector<pid_t> pids;  // the servers' processes when they are ours (their CPU is measured)
  bool own = false;
};

node_sets nodes_for(const run_context& context) {
  // run_context's convention: no server processes of ours means the nodes came from --nodes.
  if (!context.server_pids.empty()) {
    const auto& own = own_fleet();
    return {own.plain, own.tls, own.pids, true};
  }
  if (auto problem = tls_nodes_problem(context.nodes); !problem.empty()) {
    throw std::invalid_argument(std::move(problem));
  }
  node_sets sets;
  for (const auto& node : context.nodes)
    (node.tls.enabled ? sets.tls : sets.plain).push_back(node);
  return sets;
}

// Connects to each node `rounds` times, one at a time: resolve, TCP, (TLS,) the handshake with its
// script loads and permission probes, then one PING answered. Microseconds per connect.
asio::awaitable<void> connect_loop(const std::vector<redlock::node_config>& nodes, int rounds,
                                   std::vector<double>& took, error_tally& errors) {
  const auto ex = co_await asio::this_coro::executor;
  rd::connection_options options;
  rd::prepare_for_lock(options);
  std::string ping;
  redlock::resp::encode_command(ping, {"PING"});
  for (int round = 0; round < rounds; ++round) {
    for (const auto& node : nodes) {
      auto conn = rd::connection::create(ex, node, options);
      const auto t0 = clock_type::now();
      auto [ec, reply] = co_await conn->async_exec_encoded(ping, rd::request_options{},
                                                           asio::as_tuple(asio::use_awaitable));
      const auto t1 = clock_type::now();
      if (ec) {
        errors.add("connect", ec, reply.text);
      } else {
        took.push_back(micros(t1 - t0));
      }
      conn->close();
    }
  }
}

double connect_median(const std::vector<redlock::node_config>& nodes, int rounds,
                      std::string_view what, error_tally& errors) {
  std::vector<double> took;
  asio::io_context io(1);
  drive(io, connect_loop(nodes, rounds, took, errors), hang_limit, what,
        [&] { return fmt::format("{} connects done", took.size()); });
  return median(took);
}

}  // namespace

std::string tls_nodes_problem(const std::vector<redlock::node_config>& given) {
  const auto over_tls = [](const redlock::node_config& node) { return node.tls.enabled; };
  if (std::any_of(given.begin(), given.end(), over_tls)) return {};
  return "workload tls measures TLS nodes and --nodes has no rediss:// URL; give the servers' TLS "
         "ports as rediss://host:port?ca=FILE (and their plain ports as redis:// URLs to compare "
         "the two), or leave out --nodes to let it start servers of its own";
}

run_result run_tls(const run_context& context) {
  const node_sets sets = nodes_for(context);
  const int run = context.run;
  if (!sets.own && run == 0) {
    fmt::print(stderr,
               "redlock_bench: tls: on the nodes of --nodes, {} over TLS (rediss://) and {} over "
               "plain TCP{}\n",
               sets.tls.size(), sets.plain.size(),
               sets.plain.empty() ? "; the plain side and the ratios are left out" : "");
  }
  const latency_sizes latency = latency_sizes_for(context.quick);
  const throughput_sizes throughput{context.quick ? 2'000u : 20'000u, 256};
  const int connects = context.quick ? 2 : 20;
  run_result r;

  struct side {
    lock_latency_state latency;
    std::vector<double> raw_fanout_us;
    throughput_measure throughput;
    double connect_us = 0;
  } plain, tls;
  const auto measure = [&](bool over_tls) {
    const auto& nodes = over_tls ? sets.tls : sets.plain;
    if (nodes.empty()) return;
    side& into = over_tls ? tls : plain;
    const std::string link = over_tls ? "tls" : "plain";
    into.latency =
        measure_lock_latency(nodes, latency, key_prefix("tls-" + link, run) + "lock",
                             fmt::format("tls run {} latency {}", run, link), r.errors, link + " ");
    // The floor for the same nodes, right after the lock's latency loop and the same size.
    auto raw = measure_raw_fanout(nodes, key_prefix("tls-" + link, run) + "raw-",
                                  latency.iterations, latency.warmup);
    if (!raw.error.empty()) r.errors.add("raw fan-out " + link, {}, raw.error);
    into.raw_fanout_us = std::move(raw.decided_us);
    into.throughput = measure_throughput(
        nodes, sets.pids, throughput, key_prefix("tls-" + link, run),
        fmt::format("tls run {} throughput {}", run, link), r.errors, link + " ");
    into.connect_us =
        connect_median(nodes, connects, fmt::format("tls run {} connects {}", run, link), r.errors);
  };
  // Alternating which goes first, so that a drift of the machine's state over a run does not
  // favour one side.
  measure(run % 2 == 1);
  measure(run % 2 == 0);

  const bool both = !sets.plain.empty();  // the TLS side is never empty
  r.quorum = both ? plain.latency.quorum : tls.latency.quorum;
  // Which nodes were measured, so that figures from --nodes are not taken for our own servers'.
  r.figures.push_back({"own_nodes", sets.own ? static_cast<double>(sets.tls.size()) : 0.0, 0});
  r.figures.push_back({"plain_nodes", static_cast<double>(sets.plain.size()), 0});
  r.figures.push_back({"tls_nodes", static_cast<double>(sets.tls.size()), 0});

  // Each measure: its plain figures, its TLS figures, then the ratio of the two; the plain
  // figures and the ratio only when there was a plain side.
  const auto add = [&](std::vector<figure> of_plain, std::vector<figure> of_tls,
                       std::optional<figure> versus) {
    if (both) r.figures.insert(r.figures.end(), of_plain.begin(), of_plain.end());
    r.figures.insert(r.figures.end(), of_tls.begin(), of_tls.end());
    if (both && versus) r.figures.push_back(std::move(*versus));
  };
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const auto p50 = [](const std::vector<double>& sample) { return percentile(sample, 0.5); };
  const auto rate = [](const throughput_measure& m) {
    return m.seconds > 0 ? static_cast<double>(m.pairs) / m.seconds : 0.0;
  };
  add(lock_latency_figures(plain.latency, "", "_plain"),
      lock_latency_figures(tls.latency, "", "_tls"),
      figure{"acquire_p50_tls_vs_plain",
             ratio(p50(tls.latency.acquire_us), p50(plain.latency.acquire_us)), 2});
  // The same ratio for the bare fan-out: what TLS costs on this machine before any library code.
  add({{"raw_fanout_p50_us_plain", p50(plain.raw_fanout_us), 1}},
      {{"raw_fanout_p50_us_tls", p50(tls.raw_fanout_us), 1}},
      figure{"raw_fanout_p50_tls_vs_plain", ratio(p50(tls.raw_fanout_us), p50(plain.raw_fanout_us)),
             2});
  add(throughput_figures(plain.throughput, "_plain"), throughput_figures(tls.throughput, "_tls"),
      figure{"throughput_tls_vs_plain", ratio(rate(tls.throughput), rate(plain.throughput)), 2});
  add({{"connect_p50_us_plain", plain.connect_us, 0}}, {{"connect_p50_us_tls", tls.connect_us, 0}},
      std::nullopt);
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string tls_params(bool quick) {
  const auto sizes = latency_sizes_for(quick);
  return fmt::format("\"iterations\":{},\"pairs\":{},\"inflight\":256,\"connects_per_node\":{}",
                     sizes.iterations, quick ? 2'000 : 20'000, quick ? 2 : 20);
}

}  // namespace redlock::bench
