// Workload "throughput" of redlock_bench.

#include "bench_support.hpp"
#include "heap_count.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "workloads/lock_measures.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::bench {

namespace {

using namespace std::chrono_literals;

// throughput: distinct keys, many coroutines in flight, try_acquire + release pairs.

struct throughput_state {
  error_tally& errors;
  const std::string& label;
  std::string stage = "starting";
  std::uint64_t issued = 0;
  std::uint64_t completed = 0;
  std::uint64_t allocations_at_half = 0;  // heap_allocations() when half the pairs had completed
  throughput_measure m{};
};

asio::awaitable<void> throughput_worker(redlock::client& client,
                                        const redlock::lock_options& options,
                                        const std::string& prefix, std::uint64_t pairs,
                                        throughput_state& st) {
  while (st.issued < pairs) {
    std::string key = prefix + std::to_string(st.issued++);
    auto [ec, lease] = co_await client.async_try_acquire(std::move(key), options,
                                                         asio::as_tuple(asio::use_awaitable));
    if (ec) {
      st.errors.add(st.label + "try_acquire", ec, lease.diagnostics());
    } else {
      auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
      if (release_ec) st.errors.add(st.label + "release", release_ec, lease.diagnostics());
    }
    if (++st.completed == pairs / 2) st.allocations_at_half = heap_allocations();
  }
}

asio::awaitable<void> throughput_work(const std::vector<redlock::node_config>& nodes,
                                      const std::vector<pid_t>& server_pids, throughput_sizes sizes,
                                      std::string prefix, throughput_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  redlock::client client(ex, nodes, bench_client_options);
  st.m.quorum = client.quorum();
  st.stage = "ping";
  co_await must_ping(client);
  redlock::lock_options options;
  options.ttl = lock_ttl;
  options.fencing = bench_fencing;
  st.stage = "pairs";
  const double cpu0 = cpu_seconds();
  const double server_cpu0 = cpu_seconds_of(server_pids);
  const std::uint64_t allocations0 = heap_allocations();
  const auto t0 = clock_type::now();
  start_counting_instructions();
  co_await redlock::test::run_all(sizes.inflight, [&](std::size_t) {
    return throughput_worker(client, options, prefix, sizes.pairs, st);
  });
  stop_counting_instructions();
  st.m.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  st.m.cpu = cpu_seconds() - cpu0;
  st.m.server_cpu = cpu_seconds_of(server_pids) - server_cpu0;
  const std::uint64_t allocations1 = heap_allocations();
  st.m.allocations = allocations1 - allocations0;
  st.m.steady_allocations = allocations1 - st.allocations_at_half;
  st.stage = "destroying the client";
}

}  // namespace

throughput_measure measure_throughput(const std::vector<redlock::node_config>& nodes,
                                      const std::vector<pid_t>& server_pids, throughput_sizes sizes,
                                      std::string prefix, std::string_view what,
                                      error_tally& errors, const std::string& label) {
  throughput_state st{errors, label};
  st.m.pairs = sizes.pairs;
  st.m.own_nodes = !server_pids.empty();
  asio::io_context io(1);
  drive(io, throughput_work(nodes, server_pids, sizes, std::move(prefix), st), hang_limit, what,
        [&] {
          return fmt::format("stage '{}', pairs started {}, finished {}, errors so far {}\n{}",
                             st.stage, st.issued, st.completed, errors.total(), errors.summary());
        });
  return std::move(st.m);
}

std::vector<figure> throughput_figures(const throughput_measure& m, std::string_view after) {
  const auto name = [&](std::string_view base) { return fmt::format("{}{}", base, after); };
  const auto pairs = static_cast<double>(m.pairs);
  std::vector<figure> figures = {
      {name("pairs_per_s"), m.seconds > 0 ? pairs / m.seconds : 0, 0},
      {name("client_cpu_us_per_pair"), m.cpu * 1e6 / pairs, 2},
      {name("allocations_per_pair"), static_cast<double>(m.allocations) / pairs, 2},
      {name("steady_allocations_per_pair"),
       static_cast<double>(m.steady_allocations) / static_cast<double>(m.pairs - m.pairs / 2), 2},
  };
  if (m.own_nodes) {
    // Our own nodes only: with --nodes their processes are not ours to measure.
    figures.push_back({name("server_cpu_us_per_pair"), m.server_cpu * 1e6 / pairs, 2});
    figures.push_back({name("client_share_of_cpu"), m.cpu / (m.cpu + m.server_cpu), 2});
  }
  return figures;
}

run_result run_throughput(const run_context& context) {
  const int run = context.run;
  const throughput_sizes sizes{context.quick ? 2'000u : 20'000u, 256};
  run_result r;
  const throughput_measure m =
      measure_throughput(context.nodes, context.server_pids, sizes, key_prefix("throughput", run),
                         fmt::format("throughput run {}", run), r.errors);
  r.quorum = m.quorum;
  r.figures = throughput_figures(m, "");
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string throughput_params(bool quick) {
  return fmt::format("\"pairs\":{},\"inflight\":256", quick ? 2'000 : 20'000);
}

}  // namespace redlock::bench
