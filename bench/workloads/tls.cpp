// Workload "tls" of redlock_bench: what TLS costs. Five servers of its own (whatever --nodes
// says) listen both for plain RESP and for TLS (certificates made with the openssl command line,
// support/test_pki.hpp); the latency and throughput loops run over each, alternating which goes
// first from run to run, and connects are timed from the first byte to a usable connection.

#include "bench_support.hpp"
#include "net/connection.hpp"
#include "resp/encoder.hpp"
#include "scripts.hpp"
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

#include <memory>
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

run_result run_tls(const run_context& context) {
  auto& own = own_fleet();
  const int run = context.run;
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
    const auto& nodes = over_tls ? own.tls : own.plain;
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
        nodes, own.pids, throughput, key_prefix("tls-" + link, run),
        fmt::format("tls run {} throughput {}", run, link), r.errors, link + " ");
    into.connect_us =
        connect_median(nodes, connects, fmt::format("tls run {} connects {}", run, link), r.errors);
  };
  // Alternating which goes first, so that a drift of the machine's state over a run does not
  // favour one side.
  measure(run % 2 == 1);
  measure(run % 2 == 0);

  r.quorum = plain.latency.quorum;
  for (auto& f : lock_latency_figures(plain.latency, "", "_plain"))
    r.figures.push_back(std::move(f));
  for (auto& f : lock_latency_figures(tls.latency, "", "_tls"))
    r.figures.push_back(std::move(f));
  const auto p50 = [](const lock_latency_state& st) { return percentile(st.acquire_us, 0.5); };
  r.figures.push_back({"acquire_p50_tls_vs_plain", p50(tls.latency) / p50(plain.latency), 2});
  // The same ratio for the bare fan-out: what TLS costs on this machine before any library code.
  const double raw_plain = percentile(plain.raw_fanout_us, 0.5);
  const double raw_tls = percentile(tls.raw_fanout_us, 0.5);
  r.figures.push_back({"raw_fanout_p50_us_plain", raw_plain, 1});
  r.figures.push_back({"raw_fanout_p50_us_tls", raw_tls, 1});
  r.figures.push_back(
      {"raw_fanout_p50_tls_vs_plain", raw_plain > 0 ? raw_tls / raw_plain : 0.0, 2});
  for (auto& f : throughput_figures(plain.throughput, "_plain"))
    r.figures.push_back(std::move(f));
  for (auto& f : throughput_figures(tls.throughput, "_tls"))
    r.figures.push_back(std::move(f));
  const auto rate = [](const throughput_measure& m) {
    return m.seconds > 0 ? static_cast<double>(m.pairs) / m.seconds : 0.0;
  };
  r.figures.push_back(
      {"throughput_tls_vs_plain",
       rate(plain.throughput) > 0 ? rate(tls.throughput) / rate(plain.throughput) : 0.0, 2});
  r.figures.push_back({"connect_p50_us_plain", plain.connect_us, 0});
  r.figures.push_back({"connect_p50_us_tls", tls.connect_us, 0});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string tls_params(bool quick) {
  const auto sizes = latency_sizes_for(quick);
  return fmt::format(
      "\"own_nodes\":5,\"iterations\":{},\"pairs\":{},\"inflight\":256,\"connects_per_node\":{}",
      sizes.iterations, quick ? 2'000 : 20'000, quick ? 2 : 20);
}

}  // namespace redlock::bench
