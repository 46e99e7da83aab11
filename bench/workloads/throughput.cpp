// Workload "throughput" of redlock_bench.

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_support.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "workloads/workloads.hpp"

namespace redlock::bench {

namespace {

using namespace std::chrono_literals;

// throughput: distinct keys, many coroutines in flight, try_acquire + release pairs.

struct throughput_sizes {
  std::uint64_t pairs;
  std::size_t inflight;
};

struct throughput_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::uint64_t issued = 0;
  std::uint64_t completed = 0;
  double seconds = 0;
  double cpu = 0;
  std::vector<pid_t> server_pids;  // empty with --nodes
  double server_cpu = 0;
  error_tally errors;
};

asio::awaitable<void> throughput_worker(redlock::client& client,
                                        const redlock::lock_options& options,
                                        const std::string& prefix, std::uint64_t pairs,
                                        throughput_state& st) {
  while (st.issued < pairs) {
    const std::string key = prefix + std::to_string(st.issued++);
    auto [ec, lease] =
        co_await client.async_try_acquire(key, options, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      st.errors.add("try_acquire", ec, lease.diagnostics());
    } else {
      auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
      if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
    }
    ++st.completed;
  }
}

asio::awaitable<void> throughput_work(const std::vector<redlock::node_config>& nodes,
                                      throughput_sizes sizes, std::string prefix,
                                      throughput_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  redlock::client client(ex, nodes, bench_client_options);
  st.quorum = client.quorum();
  st.stage = "ping";
  co_await must_ping(client);
  redlock::lock_options options;
  options.ttl = lock_ttl;
  st.stage = "pairs";
  const double cpu0 = cpu_seconds();
  const double server_cpu0 = cpu_seconds_of(st.server_pids);
  const auto t0 = clock_type::now();
  co_await redlock::test::run_all(sizes.inflight, [&](std::size_t) {
    return throughput_worker(client, options, prefix, sizes.pairs, st);
  });
  st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  st.cpu = cpu_seconds() - cpu0;
  st.server_cpu = cpu_seconds_of(st.server_pids) - server_cpu0;
  st.stage = "destroying the client";
}

}  // namespace

run_result run_throughput(const run_context& context) {
  const auto& nodes = context.nodes;
  const auto& server_pids = context.server_pids;
  const int run = context.run;
  const throughput_sizes sizes{context.quick ? 2'000u : 20'000u, 256};
  throughput_state st;
  st.server_pids = server_pids;
  asio::io_context io(1);
  drive(io, throughput_work(nodes, sizes, key_prefix("throughput", run), st), hang_limit,
        fmt::format("throughput run {}", run), [&] {
          return fmt::format("stage '{}', pairs started {}, finished {}, errors so far {}\n{}",
                             st.stage, st.issued, st.completed, st.errors.total(),
                             st.errors.summary());
        });
  run_result r;
  r.quorum = st.quorum;
  const auto pairs = static_cast<double>(sizes.pairs);
  r.figures = {
      {"pairs_per_s", st.seconds > 0 ? pairs / st.seconds : 0, 0},
      {"client_cpu_us_per_pair", st.cpu * 1e6 / pairs, 2},
  };
  if (!server_pids.empty()) {
    // Our own nodes only: with --nodes their processes are not ours to measure.
    r.figures.push_back({"server_cpu_us_per_pair", st.server_cpu * 1e6 / pairs, 2});
    r.figures.push_back({"client_share_of_cpu", st.cpu / (st.cpu + st.server_cpu), 2});
  }
  r.figures.push_back({"errors", static_cast<double>(st.errors.total()), 0});
  r.errors = std::move(st.errors);
  return r;
}

std::string throughput_params(bool quick) {
  return fmt::format("\"pairs\":{},\"inflight\":256", quick ? 2'000 : 20'000);
}

}  // namespace redlock::bench
