// Workload "rw_lock" of redlock_bench: contention's 16 contenders on one client taking a
// redlock::rw_lock instead of the lock, each acquire a read with probability 90 % and then 50 %:
// a writer does contention's slow read-modify-write of a witness counter (1 ms), a reader holds
// 1 ms. In the same run the contention workload itself, the mutex that the same load would take.

#include "redlock/rw_lock.hpp"

#include "bench_support.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "workloads/contention.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace redlock::bench {
namespace {

using namespace std::chrono_literals;

constexpr int read_percents[] = {90, 50};

struct rw_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::string name;
  int read_percent = 0;
  redlock::lock_options options;
  std::string witness_key;
  clock_type::time_point end{};
  std::size_t waiting = 0;
  std::size_t writing = 0;  // contenders holding the lock for writing
  std::size_t reading = 0;
  std::size_t most_beside_a_writer = 0;  // holders seen at once while a writer held: 1 if right
  std::size_t most_readers = 0;
  std::uint64_t reads = 0;
  std::uint64_t writes = 0;
  std::int64_t final_counter = 0;
  double seconds = 0;
  std::vector<double> read_wait_us;
  std::vector<double> write_wait_us;
  error_tally errors;
};

asio::awaitable<void> rw_contender(redlock::rw_lock& lock, rd::connection& witness, rw_state& st,
                                   std::size_t index) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  std::minstd_rand random(static_cast<unsigned>(index + 1));
  std::uniform_int_distribution<int> percent(0, 99);
  while (clock_type::now() < st.end) {
    const bool write = percent(random) >= st.read_percent;
    const auto t0 = clock_type::now();
    ++st.waiting;
    error_code ec;
    redlock::lease held;
    // Not a conditional expression around the co_awaits: g++ 12 miscompiles that.
    if (write) {
      std::tie(ec, held) = co_await lock.async_acquire_write(asio::as_tuple(asio::use_awaitable));
    } else {
      std::tie(ec, held) = co_await lock.async_acquire_read(asio::as_tuple(asio::use_awaitable));
    }
    --st.waiting;
    if (ec) {
      st.errors.add(write ? "acquire write" : "acquire read", ec, held.diagnostics());
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    (write ? st.write_wait_us : st.read_wait_us).push_back(micros(clock_type::now() - t0));
    ++(write ? st.writes : st.reads);
    ++(write ? st.writing : st.reading);
    if (st.writing > 0)
      st.most_beside_a_writer = std::max(st.most_beside_a_writer, st.writing + st.reading);
    st.most_readers = std::max(st.most_readers, st.reading);
    if (write) {
      co_await slow_increment(witness, st.witness_key, pause, st.errors);
    } else {
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    --(write ? st.writing : st.reading);
    auto [release_ec] = co_await held.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_ec) st.errors.add("release", release_ec, held.diagnostics());
  }
}

asio::awaitable<void> rw_work(const std::vector<redlock::node_config>& nodes,
                              clock_type::duration duration, rw_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const std::vector<redlock::node_config> witness_node(1, nodes.front());
  connection_set witness(ex, witness_node);
  auto& conn = *witness.all.front();
  st.stage = "witness setup";
  const std::string_view init_command[] = {"SET", st.witness_key, "0"};
  co_await must_exec(conn, init_command);
  {
    redlock::client client(ex, nodes, bench_client_options);
    redlock::rw_lock lock(client, st.name, st.options);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    st.stage = "contending";
    const auto t0 = clock_type::now();
    st.end = t0 + duration;
    co_await redlock::test::run_all(contention_contenders, [&](std::size_t index) {
      return rw_contender(lock, conn, st, index);
    });
    st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    st.stage = "destroying the client";
  }
  st.stage = "witness read";
  const std::string_view get_command[] = {"GET", st.witness_key};
  const std::string_view del_command[] = {"DEL", st.witness_key};
  const auto reply = co_await must_exec(conn, get_command);
  const auto counter = to_integer(reply);
  if (!counter) {
    throw std::runtime_error(fmt::format("witness key {} holds '{}', not a counter", st.witness_key,
                                         to_debug_string(reply)));
  }
  st.final_counter = *counter;
  co_await must_exec(conn, del_command);
  st.stage = "closing";
}

rw_state measure_rw(const run_context& context, int read_percent) {
  rw_state st;
  const std::string prefix = key_prefix("rw_lock", context.run) + fmt::format("r{}-", read_percent);
  st.name = prefix + "lock";
  st.witness_key = prefix + "counter";
  st.read_percent = read_percent;
  st.options.ttl = lock_ttl;  // no wait limit, as contention's
  const auto duration = contention_phase(context.quick);
  asio::io_context io(1);
  drive(io, rw_work(context.nodes, duration, st), hang_limit + duration,
        fmt::format("rw_lock run {}, {} % reads", context.run, read_percent), [&] {
          return fmt::format(
              "stage '{}', reads {}, writes {}, contenders waiting {}, reading {}, writing {}, "
              "errors so far {}\n{}",
              st.stage, st.reads, st.writes, st.waiting, st.reading, st.writing, st.errors.total(),
              st.errors.summary());
        });
  return st;
}

}  // namespace

run_result run_rw_lock(const run_context& context) {
  std::vector<rw_state> phases(std::size(read_percents));
  double lost_updates = 0;
  run_result r = measure_beside_mutex(
      context, phases.size(),
      [&](std::size_t i) { phases[i] = measure_rw(context, read_percents[i]); }, lost_updates);
  const double mutex_rate = figure_of(r, "acquisitions_per_s_mutex");
  for (auto& st : phases) {
    const double rate = st.seconds > 0 ? static_cast<double>(st.reads + st.writes) / st.seconds : 0;
    const auto tag = fmt::format("reads_{}", st.read_percent);
    r.figures.push_back({fmt::format("acquisitions_per_s_{}", tag), rate, 1});
    r.figures.push_back(
        {fmt::format("vs_mutex_{}", tag), mutex_rate > 0 ? rate / mutex_rate : 0, 2});
    r.figures.push_back(
        {fmt::format("read_wait_p50_us_{}", tag), percentile(st.read_wait_us, 0.50), 1});
    r.figures.push_back(
        {fmt::format("read_wait_p99_us_{}", tag), percentile(st.read_wait_us, 0.99), 1});
    r.figures.push_back(
        {fmt::format("write_wait_p50_us_{}", tag), percentile(st.write_wait_us, 0.50), 1});
    r.figures.push_back(
        {fmt::format("write_wait_p99_us_{}", tag), percentile(st.write_wait_us, 0.99), 1});
    r.figures.push_back({fmt::format("writes_{}", tag), static_cast<double>(st.writes), 0});
    // Readers seen holding at once (more than 1: they share), and holders seen beside a writer
    // (1: it held alone), from inside the client.
    r.figures.push_back(
        {fmt::format("most_readers_{}", tag), static_cast<double>(st.most_readers), 0});
    r.figures.push_back({fmt::format("most_beside_a_writer_{}", tag),
                         static_cast<double>(st.most_beside_a_writer), 0});
    lost_updates += static_cast<double>(st.writes) - static_cast<double>(st.final_counter);
    r.errors.merge(st.errors, fmt::format("{} % reads ", st.read_percent));
  }
  r.figures.push_back({"lost_updates", lost_updates, 0});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string rw_lock_params(bool quick) {
  return fmt::format("\"contenders\":{},\"duration_s\":{},\"hold_ms\":1,\"read_percent\":[{},{}]",
                     contention_contenders, quick ? 1 : 10, read_percents[0], read_percents[1]);
}

}  // namespace redlock::bench
