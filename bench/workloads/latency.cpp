// Workload "latency" of redlock_bench.

#include "bench_support.hpp"
#include "heap_count.hpp"
#include "lock/key_names.hpp"
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

// latency: one caller, sequential acquire + release on one key; plain SET beside it.

struct latency_state : lock_latency_state {
  std::vector<double> set_us, fanout_us;
  std::vector<double> write_back_acquire_us;  // --fencing: acquires that had to write back
  error_tally errors;
};

// --fencing: acquires whose grants disagree on the counter, so that the token must be written
// back (a second round trip). Before each acquire, untimed, node i's counter is raised by i + 1:
// any quorum of grants then holds at least two different counters.
asio::awaitable<void> write_back_latency_loop(const std::vector<redlock::node_config>& nodes,
                                              latency_sizes sizes, std::string key,
                                              latency_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const int total = sizes.warmup + sizes.iterations;
  redlock::client client(ex, nodes, bench_client_options);
  co_await must_ping(client);
  connection_set conns(ex, nodes);
  const std::string counter = redlock::detail::fencing_counter_key(key);
  std::vector<std::string> steps;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    steps.push_back(std::to_string(i + 1));
  redlock::lock_options options;
  options.ttl = lock_ttl;
  options.fencing = true;
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    st.stage = "skewing the counters";
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::string_view incrby[] = {"INCRBY", counter, steps[i]};
      co_await must_exec(*conns.all[i], incrby);
    }
    st.stage = "acquire with write-back";
    const auto t0 = clock_type::now();
    auto [ec, lease] =
        co_await client.async_acquire(key, options, asio::as_tuple(asio::use_awaitable));
    const auto t1 = clock_type::now();
    if (ec) {
      st.errors.add("fenced acquire", ec, lease.diagnostics());
      continue;
    }
    auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_ec) st.errors.add("fenced release", release_ec, lease.diagnostics());
    if (st.iteration >= sizes.warmup) st.write_back_acquire_us.push_back(micros(t1 - t0));
  }
  st.stage = "clean-up";
  for (const auto& conn : conns.all) {
    const std::string_view del[] = {"DEL", counter};
    co_await must_exec(*conn, del);
  }
}

asio::awaitable<void> latency_work(const std::vector<redlock::node_config>& nodes,
                                   latency_sizes sizes, std::string prefix, latency_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const int total = sizes.warmup + sizes.iterations;
  co_await lock_latency_loop(nodes, sizes, prefix + "lock", st, st.errors);
  if (bench_fencing) co_await write_back_latency_loop(nodes, sizes, prefix + "fenced", st);

  connection_set conns(ex, nodes);
  const std::string key = prefix + "set";
  const std::string_view set_command[] = {"SET", key, "xxx"};
  const std::string_view del_command[] = {"DEL", key};
  auto& first = *conns.all.front();
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    st.stage = "plain SET";
    const auto t0 = clock_type::now();
    auto [ec, reply] =
        co_await first.async_exec(set_command, {}, asio::as_tuple(asio::use_awaitable));
    const auto t1 = clock_type::now();
    if (ec || reply.is_error()) {
      st.errors.add("SET", ec, reply.text);
    } else if (st.iteration >= sizes.warmup) {
      st.set_us.push_back(micros(t1 - t0));
    }
  }
  const std::size_t needed = nodes.size() / 2 + 1;
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    st.stage = "fan-out SET";
    const auto decided = co_await fan_out(conns.all, set_command, needed, st.errors);
    if (st.iteration >= sizes.warmup) st.fanout_us.push_back(micros(decided));
  }
  st.stage = "clean-up";
  for (const auto& conn : conns.all)
    co_await must_exec(*conn, del_command);
  st.stage = "closing";
}

}  // namespace

asio::awaitable<void> lock_latency_loop(const std::vector<redlock::node_config>& nodes,
                                        latency_sizes sizes, std::string key,
                                        lock_latency_state& st, error_tally& errors,
                                        std::string label) {
  const auto ex = co_await asio::this_coro::executor;
  const int total = sizes.warmup + sizes.iterations;
  redlock::client client(ex, nodes, bench_client_options);
  st.quorum = client.quorum();
  st.stage = "ping";
  co_await must_ping(client);
  redlock::lock_options options;
  options.ttl = lock_ttl;
  options.fencing = bench_fencing;
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    if (st.iteration == sizes.warmup) start_counting_instructions();
    st.stage = "acquire";
    const std::uint64_t allocations0 = heap_allocations();
    const auto t0 = clock_type::now();
    auto [ec, lease] =
        co_await client.async_acquire(key, options, asio::as_tuple(asio::use_awaitable));
    const auto t1 = clock_type::now();
    if (ec) {
      errors.add(label + "acquire", ec, lease.diagnostics());
      continue;
    }
    st.stage = "release";
    auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    const auto t2 = clock_type::now();
    if (release_ec) errors.add(label + "release", release_ec, lease.diagnostics());
    if (st.iteration < sizes.warmup) continue;
    st.allocations += heap_allocations() - allocations0;
    st.acquire_us.push_back(micros(t1 - t0));
    if (!release_ec) st.release_us.push_back(micros(t2 - t1));
  }
  if (total > sizes.warmup) stop_counting_instructions();
  st.stage = "destroying the client";
}

std::string describe_progress(const lock_latency_state& st, const error_tally& errors) {
  return fmt::format("stage '{}', iteration {}, errors so far {}\n{}", st.stage, st.iteration,
                     errors.total(), errors.summary());
}

lock_latency_state measure_lock_latency(const std::vector<redlock::node_config>& nodes,
                                        latency_sizes sizes, std::string key, std::string_view what,
                                        error_tally& errors, std::string label) {
  lock_latency_state st;
  asio::io_context io(1);
  drive(io, lock_latency_loop(nodes, sizes, std::move(key), st, errors, std::move(label)),
        hang_limit, what, [&] { return describe_progress(st, errors); });
  return st;
}

std::vector<figure> lock_latency_figures(const lock_latency_state& st, std::string_view before,
                                         std::string_view after) {
  const auto name = [&](std::string_view base) {
    return fmt::format("{}{}{}", before, base, after);
  };
  return {
      {name("acquire_p50_us"), percentile(st.acquire_us, 0.50), 1},
      {name("acquire_p99_us"), percentile(st.acquire_us, 0.99), 1},
      {name("release_p50_us"), percentile(st.release_us, 0.50), 1},
      {name("release_p99_us"), percentile(st.release_us, 0.99), 1},
  };
}

latency_sizes latency_sizes_for(bool quick) {
  return quick ? latency_sizes{20, 200} : latency_sizes{200, 2000};
}

run_result run_latency(const run_context& context) {
  const auto& nodes = context.nodes;
  const int run = context.run;
  const latency_sizes sizes = latency_sizes_for(context.quick);
  latency_state st;
  asio::io_context io(1);
  drive(io, latency_work(nodes, sizes, key_prefix("latency", run), st), hang_limit,
        fmt::format("latency run {}", run), [&] { return describe_progress(st, st.errors); });
  run_result r;
  r.quorum = st.quorum;
  const double set_p50 = percentile(st.set_us, 0.50);
  const double fanout_p50 = percentile(st.fanout_us, 0.50);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  r.figures = lock_latency_figures(st, "", "");
  const double acquire_p50 = r.figures[0].value;
  const double release_p50 = r.figures[2].value;
  r.figures.insert(
      r.figures.end(),
      {
          {"set_rtt_p50_us", set_p50, 1},
          {"set_rtt_p99_us", percentile(st.set_us, 0.99), 1},
          {"set_fanout_quorum_p50_us", fanout_p50, 1},
          {"set_fanout_quorum_p99_us", percentile(st.fanout_us, 0.99), 1},
          // Against one SET to one node, and against the same SET sent to every node and decided at
          // a quorum of replies: the network work a Redlock round cannot avoid.
          {"acquire_vs_set", ratio(acquire_p50, set_p50), 2},
          {"acquire_vs_fanout", ratio(acquire_p50, fanout_p50), 2},
          {"release_vs_set", ratio(release_p50, set_p50), 2},
          {"release_vs_fanout", ratio(release_p50, fanout_p50), 2},
          // Acquire + release, on every thread of the process (the client's one).
          {"allocations_per_pair",
           static_cast<double>(st.allocations) / static_cast<double>(sizes.iterations), 2},
          {"errors", static_cast<double>(st.errors.total()), 0},
      });
  if (bench_fencing) {
    // acquire_p50_us is then the fenced acquire on an uncontended key, whose grants agree.
    const double write_back_p50 = percentile(st.write_back_acquire_us, 0.50);
    r.figures.insert(
        r.figures.end(),
        {
            {"acquire_with_write_back_p50_us", write_back_p50, 1},
            {"acquire_with_write_back_p99_us", percentile(st.write_back_acquire_us, 0.99), 1},
            {"write_back_vs_fanout", ratio(write_back_p50, fanout_p50), 2},
        });
  }
  r.errors = std::move(st.errors);
  return r;
}

std::string latency_params(bool quick) {
  return quick ? "\"warmup\":20,\"iterations\":200" : "\"warmup\":200,\"iterations\":2000";
}

}  // namespace redlock::bench
