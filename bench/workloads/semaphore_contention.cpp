// Workload "semaphore" of redlock_bench: the contention workload's contenders (16 coroutines on
// one client, each holding for 1 ms under a slow read-modify-write of a witness counter), taking a
// permit of a redlock::semaphore instead of the lock, with 1, 4 and 16 permits; and in the same run
// the contention workload itself, so that one permit can be set against the mutex it stands for.

#include "bench_support.hpp"
#include "lock/key_names.hpp"
#include "redlock/lease.hpp"
#include "redlock/semaphore.hpp"
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
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlock::bench {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t permit_counts[] = {1, 4, 16};
static_assert(permit_counts[0] == 1, "permits_1_vs_mutex reads the first phase");

// contention_state's counterpart for a semaphore. Each slot has a witness counter of its own: two
// holders of one slot at once would lose an update there, as two holders of the lock do on
// contention's single counter, while holders of different slots may overlap as they should.
struct permit_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::string name;
  std::size_t permits = 0;
  redlock::lock_options options;
  std::unordered_map<std::string, std::size_t> slot_of;  // slot key -> slot
  std::vector<std::string> witness_keys;                 // one per slot
  clock_type::time_point end{};
  std::size_t waiting = 0;  // contenders inside async_acquire
  std::size_t holding = 0;  // contenders between a granted acquire and their release
  std::size_t most_holding = 0;
  std::uint64_t acquisitions = 0;
  std::int64_t final_counters = 0;  // the witness counters summed
  double seconds = 0;
  std::vector<double> wait_us;  // from calling async_acquire to holding the permit
  error_tally errors;
};

// contender() of contention.cpp with a permit for the lock: acquire, GET the slot's witness, hold
// 1 ms, SET + 1, release, until st.end.
asio::awaitable<void> permit_contender(redlock::semaphore& semaphore, rd::connection& witness,
                                       permit_state& st) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  while (clock_type::now() < st.end) {
    const auto t0 = clock_type::now();
    ++st.waiting;
    auto [ec, lease] = co_await semaphore.async_acquire(asio::as_tuple(asio::use_awaitable));
    --st.waiting;
    if (ec) {
      st.errors.add("acquire", ec, lease.diagnostics());
      pause.expires_after(1ms);  // do not spin on a persistent failure
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    const auto slot = st.slot_of.find(lease.resource());
    if (slot == st.slot_of.end()) {
      st.errors.add("permit", {},
                    fmt::format("key {} is no slot of {}", lease.resource(), st.name));
      co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    st.wait_us.push_back(micros(clock_type::now() - t0));
    ++st.acquisitions;
    st.most_holding = std::max(st.most_holding, ++st.holding);

    co_await slow_increment(witness, st.witness_keys[slot->second], pause, st.errors);

    // Counted out before the release goes: its grant may reach a waiter of this client before
    // the release's own completion does.
    --st.holding;
    auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
  }
}

// contention_work's counterpart: the witness counters set to 0, the contenders run for `duration`
// on one client, the counters read and deleted.
asio::awaitable<void> semaphore_work(const std::vector<redlock::node_config>& nodes,
                                     clock_type::duration duration, permit_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const std::vector<redlock::node_config> witness_node(1, nodes.front());
  connection_set witness(ex, witness_node);
  auto& conn = *witness.all.front();
  st.stage = "witness setup";
  for (const auto& key : st.witness_keys) {
    const std::string_view init_command[] = {"SET", key, "0"};
    co_await must_exec(conn, init_command);
  }
  {
    redlock::client client(ex, nodes, bench_client_options);
    redlock::semaphore semaphore(client, st.name, st.permits, st.options);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    st.stage = "contending";
    const auto t0 = clock_type::now();
    st.end = t0 + duration;
    co_await redlock::test::run_all(
        contention_contenders, [&](std::size_t) { return permit_contender(semaphore, conn, st); });
    st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    st.stage = "destroying the client";
  }
  st.stage = "witness read";
  for (const auto& key : st.witness_keys) {
    const std::string_view get_command[] = {"GET", key};
    const std::string_view del_command[] = {"DEL", key};
    const auto reply = co_await must_exec(conn, get_command);
    const auto counter = to_integer(reply);
    if (!counter) {
      throw std::runtime_error(
          fmt::format("witness key {} holds '{}', not a counter", key, to_debug_string(reply)));
    }
    st.final_counters += *counter;
    co_await must_exec(conn, del_command);
  }
  st.stage = "closing";
}

permit_state measure_permits(const run_context& context, std::size_t permits) {
  permit_state st;
  const std::string prefix = key_prefix("semaphore", context.run) + fmt::format("p{}-", permits);
  st.name = prefix + "permits";
  st.permits = permits;
  st.options.ttl = lock_ttl;  // no wait limit, as contention's
  for (std::size_t slot = 0; slot < permits; ++slot) {
    st.slot_of.emplace(rd::semaphore_slot_key(st.name, slot), slot);
    st.witness_keys.push_back(fmt::format("{}counter:{}", prefix, slot));
  }
  const auto duration = contention_phase(context.quick);
  asio::io_context io(1);
  drive(io, semaphore_work(context.nodes, duration, st), hang_limit + duration,
        fmt::format("semaphore run {}, {} permits", context.run, permits), [&] {
          return fmt::format(
              "stage '{}', acquisitions {}, contenders waiting in async_acquire {}, holding {}, "
              "errors so far {}\n{}",
              st.stage, st.acquisitions, st.waiting, st.holding, st.errors.total(),
              st.errors.summary());
        });
  return st;
}

}  // namespace

run_result run_semaphore(const run_context& context) {
  std::vector<permit_state> phases(std::size(permit_counts));
  double lost_updates = 0;
  run_result r = measure_beside_mutex(
      context, phases.size(),
      [&](std::size_t i) { phases[i] = measure_permits(context, permit_counts[i]); }, lost_updates);
  const double mutex_rate = figure_of(r, "acquisitions_per_s_mutex");
  const auto rate_of = [](const permit_state& st) {
    return st.seconds > 0 ? static_cast<double>(st.acquisitions) / st.seconds : 0;
  };
  for (auto& st : phases) {
    r.figures.push_back({fmt::format("acquisitions_per_s_permits_{}", st.permits), rate_of(st), 1});
    r.figures.push_back(
        {fmt::format("wait_p50_us_permits_{}", st.permits), percentile(st.wait_us, 0.50), 1});
    r.figures.push_back(
        {fmt::format("wait_p99_us_permits_{}", st.permits), percentile(st.wait_us, 0.99), 1});
    // Most contenders holding a permit at once, seen from inside the client: never above permits.
    r.figures.push_back({fmt::format("max_holders_permits_{}", st.permits),
                         static_cast<double>(st.most_holding), 0});
    lost_updates += static_cast<double>(st.acquisitions) - static_cast<double>(st.final_counters);
    r.errors.merge(st.errors, fmt::format("{} permits ", st.permits));
  }
  const double one_permit = rate_of(phases.front());
  r.figures.push_back({"permits_1_vs_mutex", mutex_rate > 0 ? one_permit / mutex_rate : 0, 2});
  r.figures.push_back({"lost_updates", lost_updates, 0});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string semaphore_params(bool quick) {
  std::string permits;
  for (const auto n : permit_counts)
    permits += fmt::format("{}{}", permits.empty() ? "" : ",", n);
  return fmt::format("\"contenders\":{},\"duration_s\":{},\"hold_ms\":1,\"permits\":[{}]",
                     contention_contenders, quick ? 1 : 10, permits);
}

}  // namespace redlock::bench
