// Workload "contention" of redlock_bench.

#include "workloads/contention.hpp"

#include "bench_support.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::bench {

using namespace std::chrono_literals;

std::optional<std::int64_t> to_integer(const redlock::resp::value& reply) {
  std::int64_t value = 0;
  const auto& t = reply.text;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (!reply.is_string() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return value;
}

asio::awaitable<void> slow_increment(rd::connection& witness, const std::string& witness_key,
                                     asio::steady_timer& pause, error_tally& errors) {
  const std::string_view get_command[] = {"GET", witness_key};
  auto [get_ec, got] =
      co_await witness.async_exec(get_command, {}, asio::as_tuple(asio::use_awaitable));
  const auto counter = get_ec ? std::nullopt : to_integer(got);
  if (!counter) {
    errors.add("witness GET", get_ec, got.text);
    co_return;
  }
  pause.expires_after(1ms);
  co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  const std::string next = std::to_string(*counter + 1);
  const std::string_view set_command[] = {"SET", witness_key, next};
  auto [set_ec, set_reply] =
      co_await witness.async_exec(set_command, {}, asio::as_tuple(asio::use_awaitable));
  if (set_ec || set_reply.is_error()) errors.add("witness SET", set_ec, set_reply.text);
}

asio::awaitable<void> contender(redlock::client& client, rd::connection& witness,
                                contention_state& st, std::size_t index) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  while (clock_type::now() < st.end) {
    const auto t0 = clock_type::now();
    ++st.waiting;
    auto [ec, lease] =
        co_await client.async_acquire(st.key, st.options, asio::as_tuple(asio::use_awaitable));
    --st.waiting;
    if (ec == redlock::error::wait_timeout) {
      ++st.gave_up;
      continue;
    }
    if (ec) {
      st.errors.add("acquire", ec, lease.diagnostics());
      pause.expires_after(1ms);  // do not spin on a persistent failure
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    st.wait_us.push_back(micros(clock_type::now() - t0));
    ++st.acquisitions;
    if (index < st.per_contender.size()) ++st.per_contender[index];

    co_await slow_increment(witness, st.witness_key, pause, st.errors);

    auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
  }
}

namespace {

struct contention_sizes {
  std::size_t contenders;
  clock_type::duration duration;
};

asio::awaitable<void> contention_work(const std::vector<redlock::node_config>& nodes,
                                      contention_sizes sizes, contention_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const std::vector<redlock::node_config> witness_node(1, nodes.front());
  connection_set witness(ex, witness_node);
  auto& conn = *witness.all.front();
  const std::string_view init_command[] = {"SET", st.witness_key, "0"};
  const std::string_view get_command[] = {"GET", st.witness_key};
  const std::string_view del_command[] = {"DEL", st.witness_key};
  st.stage = "witness setup";
  co_await must_exec(conn, init_command);
  {
    redlock::client client(ex, nodes, bench_client_options);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    st.stage = "contending";
    const auto t0 = clock_type::now();
    st.end = t0 + sizes.duration;
    co_await redlock::test::run_all(sizes.contenders,
                                    [&](std::size_t i) { return contender(client, conn, st, i); });
    st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    st.stage = "destroying the client";
  }
  st.stage = "witness read";
  const auto final_reply = co_await must_exec(conn, get_command);
  const auto final_counter = to_integer(final_reply);
  if (!final_counter) {
    throw std::runtime_error(
        fmt::format("witness key holds '{}', not a counter", to_debug_string(final_reply)));
  }
  st.final_counter = *final_counter;
  co_await must_exec(conn, del_command);
  st.stage = "closing";
}

}  // namespace

run_result run_contention(const run_context& context) {
  const auto& nodes = context.nodes;
  const int run = context.run;
  const contention_sizes sizes{
      contention_contenders, context.quick ? clock_type::duration(1s) : clock_type::duration(10s)};
  contention_state st;
  const std::string prefix = key_prefix("contention", run);
  st.key = prefix + "lock";
  st.witness_key = prefix + "counter";
  st.options.ttl = lock_ttl;  // no wait limit
  asio::io_context io(1);
  drive(io, contention_work(nodes, sizes, st), hang_limit + sizes.duration,
        fmt::format("contention run {}", run), [&] {
          return fmt::format(
              "stage '{}', acquisitions {}, contenders waiting in async_acquire {}, errors so far "
              "{}\n{}",
              st.stage, st.acquisitions, st.waiting, st.errors.total(), st.errors.summary());
        });
  run_result r;
  r.quorum = st.quorum;
  const auto acquisitions = static_cast<double>(st.acquisitions);
  r.figures = {
      {"acquisitions_per_s", st.seconds > 0 ? acquisitions / st.seconds : 0, 1},
      {"acquisitions", acquisitions, 0},
      {"wait_p50_us", percentile(st.wait_us, 0.50), 1},
      {"wait_p99_us", percentile(st.wait_us, 0.99), 1},
      {"lost_updates", acquisitions - static_cast<double>(st.final_counter), 0},
      {"errors", static_cast<double>(st.errors.total()), 0},
  };
  r.errors = std::move(st.errors);
  return r;
}

std::string contention_params(bool quick) {
  return fmt::format("\"contenders\":{},\"duration_s\":{},\"hold_ms\":1", contention_contenders,
                     quick ? 1 : 10);
}

double figure_of(const run_result& r, std::string_view name) {
  for (const auto& f : r.figures)
    if (f.name == name) return f.value;
  throw std::logic_error(fmt::format("the contention workload has no figure '{}'", name));
}

run_result measure_beside_mutex(const run_context& context, std::size_t phases,
                                const std::function<void(std::size_t)>& measure,
                                double& lost_updates) {
  const bool mutex_first = context.run % 2 == 0;
  std::optional<run_result> mutex;
  if (mutex_first) mutex = run_contention(context);
  for (std::size_t k = 0; k < phases; ++k)
    measure(mutex_first ? k : phases - 1 - k);
  if (!mutex_first) mutex = run_contention(context);

  // Figures in one order whatever the phases' order: the medians are taken by position.
  run_result r;
  r.quorum = mutex->quorum;
  r.figures = {
      {"acquisitions_per_s_mutex", figure_of(*mutex, "acquisitions_per_s"), 1},
      {"wait_p50_us_mutex", figure_of(*mutex, "wait_p50_us"), 1},
      {"wait_p99_us_mutex", figure_of(*mutex, "wait_p99_us"), 1},
  };
  lost_updates += figure_of(*mutex, "lost_updates");
  r.errors.merge(mutex->errors, "mutex ");
  return r;
}

}  // namespace redlock::bench
