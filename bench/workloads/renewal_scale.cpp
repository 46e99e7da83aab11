// Workload "renewal_scale" of redlock_bench.

#include "bench_support.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/observer.hpp"
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
#include <fstream>
#include <malloc.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::bench {

namespace {

using namespace std::chrono_literals;

// renewal_scale: many leases held at once with auto-renewal; what keeping them costs the client
// (CPU, memory) while nothing but renewals happens.

struct renewal_sizes {
  std::size_t leases;
  std::chrono::milliseconds ttl;
  std::chrono::seconds hold;
  std::size_t inflight;
};

// Quick mode keeps the TTL short so that every lease is renewed a few times within the hold.
renewal_sizes renewal_sizes_for(bool quick) {
  renewal_sizes sizes =
      quick ? renewal_sizes{500, 2'000ms, 3s, 256} : renewal_sizes{10'000, 10'000ms, 30s, 256};
  if (bench_renewal_leases != 0) sizes.leases = bench_renewal_leases;
  return sizes;
}

struct renewal_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::vector<pid_t> server_pids;  // empty with --nodes
  std::size_t issued = 0;
  std::size_t acquired = 0;
  std::size_t released = 0;
  std::uint64_t lost = 0;
  std::uint64_t watchers = 0;  // async_wait_lost still pending
  std::size_t not_held_at_end = 0;
  double acquire_seconds = 0;
  double release_seconds = 0;
  double hold_seconds = 0;
  double cpu = 0;
  double server_cpu = 0;
  double rss_before = 0;
  double rss_hold = 0;
  double script_calls = 0;     // all nodes together, during the hold
  std::uint64_t renewals = 0;  // confirmed during the hold (the observer's count)
  std::uint64_t keys_left = 0;
  error_tally errors;
};

// Resident set size of this process in bytes, from /proc; 0 where it cannot be read.
double rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) {
      return std::stod(line.substr(6)) * 1024;  // the kernel writes "VmRSS:    1234 kB"
    }
  }
  return 0;
}

// The value of `field` (e.g. "calls") on the `stat` line (e.g. "cmdstat_evalsha") of an
// INFO commandstats reply; 0 when the command was never called (Redis omits its line then).
double command_stat(std::string_view info, std::string_view stat, std::string_view field) {
  const auto line_start = info.find(fmt::format("{}:", stat));
  if (line_start == std::string_view::npos) return 0;
  auto line = info.substr(line_start);
  line = line.substr(0, line.find('\r'));
  const auto at = line.find(fmt::format("{}=", field));
  // A preceding ',' or ':' keeps "calls" from matching inside "failed_calls".
  if (at == std::string_view::npos || (line[at - 1] != ',' && line[at - 1] != ':')) return 0;
  const auto digits = line.substr(at + field.size() + 1);
  std::uint64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return static_cast<double>(value);
}

// The scripts the nodes ran: the renewals of one tick go out together, one script per node for
// many leases, and nothing else runs scripts during the hold (releases start only after it).
// Executions that failed (NOSCRIPT, after which the connection resends the call as EVAL) are left
// out so that the fallback is not counted twice. With --nodes shared by other clients their
// scripts are counted too.
asio::awaitable<double> script_executions(connection_set& conns) {
  const std::string_view command[] = {"INFO", "commandstats"};
  double total = 0;
  for (const auto& conn : conns.all) {
    const auto reply = co_await must_exec(*conn, command);
    for (const std::string_view stat : {"cmdstat_evalsha", "cmdstat_eval"}) {
      total +=
          command_stat(reply.text, stat, "calls") - command_stat(reply.text, stat, "failed_calls");
    }
  }
  co_return total;
}

// Keys under `prefix` still present on the nodes, with SCAN so that a large keyspace is not
// blocked on.
asio::awaitable<std::uint64_t> count_keys(connection_set& conns, const std::string& prefix) {
  const std::string pattern = prefix + "*";
  std::uint64_t count = 0;
  for (const auto& conn : conns.all) {
    std::string cursor = "0";
    do {
      const std::string_view command[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
      const auto reply = co_await must_exec(*conn, command);
      if (reply.elements.size() != 2) {
        throw std::runtime_error(fmt::format("SCAN on {}: unexpected reply {}",
                                             conn->node().address(), to_debug_string(reply)));
      }
      cursor = reply.elements[0].text;
      count += reply.elements[1].elements.size();
    } while (cursor != "0");
  }
  co_return count;
}

// Counts the renewals a quorum confirmed (redlock::observer::on_extend); called on the client's
// executor, which is this workload's one thread.
class renewal_counter final : public redlock::observer {
 public:
  void on_extend(const redlock::lease_event& event) override {
    if (!event.error) ++confirmed;
  }
  std::uint64_t confirmed = 0;
};

asio::awaitable<void> acquirer(redlock::client& client, const redlock::lock_options& options,
                               const std::string& prefix, std::vector<redlock::lease>& leases,
                               renewal_state& st) {
  while (st.issued < leases.size()) {
    const std::size_t i = st.issued++;
    auto [ec, lease] = co_await client.async_try_acquire(prefix + std::to_string(i), options,
                                                         asio::as_tuple(asio::use_awaitable));
    if (ec) {
      st.errors.add("try_acquire", ec, lease.diagnostics());
      continue;
    }
    ++st.acquired;
    ++st.watchers;
    lease.async_wait_lost([&st](error_code lost_ec) {
      --st.watchers;
      if (lost_ec == redlock::error::lock_lost) {
        ++st.lost;
      } else if (lost_ec != asio::error::operation_aborted) {
        st.errors.add("wait_lost", lost_ec);
      }
    });
    leases[i] = std::move(lease);
  }
}

asio::awaitable<void> releaser(std::vector<redlock::lease>& leases, std::size_t& next,
                               renewal_state& st) {
  while (next < leases.size()) {
    auto& lease = leases[next++];
    // Never acquired, or lost (counted by its watcher): nothing of ours to release.
    if (!lease.held()) continue;
    auto [ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (ec) st.errors.add("release", ec, lease.diagnostics());
    ++st.released;
  }
}

asio::awaitable<void> renewal_work(const std::vector<redlock::node_config>& nodes,
                                   renewal_sizes sizes, std::string prefix, renewal_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  connection_set inspect(ex, nodes);
  {
    const auto renewals = std::make_shared<renewal_counter>();
    auto client_options = bench_client_options;
    client_options.observer = renewals;
    redlock::client client(ex, nodes, client_options);
    // Declared after the client: destroyed before it, while it can still release them.
    std::vector<redlock::lease> leases(sizes.leases);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    redlock::lock_options options;
    options.ttl = sizes.ttl;
    options.auto_renew = true;

    st.stage = "acquiring";
    // Earlier workloads in this process leave freed pages in the heap, which the leases would
    // reuse without growing RSS: hand them back first so that the growth is the leases' own.
    ::malloc_trim(0);
    st.rss_before = rss_bytes();
    const auto t0 = clock_type::now();
    co_await redlock::test::run_all(
        sizes.inflight, [&](std::size_t) { return acquirer(client, options, prefix, leases, st); });
    st.acquire_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();

    st.stage = "holding";
    const double calls0 = co_await script_executions(inspect);
    const std::uint64_t renewals0 = renewals->confirmed;
    const double cpu0 = cpu_seconds();
    const double server_cpu0 = cpu_seconds_of(st.server_pids);
    const auto hold0 = clock_type::now();
    // Under callgrind: the client's instructions for the renewals of the hold.
    start_counting_instructions();
    asio::steady_timer hold(ex, sizes.hold);
    co_await hold.async_wait(asio::use_awaitable);
    stop_counting_instructions();
    st.hold_seconds = std::chrono::duration<double>(clock_type::now() - hold0).count();
    st.cpu = cpu_seconds() - cpu0;
    st.server_cpu = cpu_seconds_of(st.server_pids) - server_cpu0;
    st.rss_hold = rss_bytes();
    st.renewals = renewals->confirmed - renewals0;
    st.script_calls = co_await script_executions(inspect) - calls0;
    for (const auto& lease : leases)
      st.not_held_at_end += lease.held() ? 0 : 1;

    st.stage = "releasing";
    std::size_t next = 0;
    const auto release0 = clock_type::now();
    co_await redlock::test::run_all(sizes.inflight,
                                    [&](std::size_t) { return releaser(leases, next, st); });
    st.release_seconds = std::chrono::duration<double>(clock_type::now() - release0).count();
    st.stage = "destroying the client";
  }
  if (!st.server_pids.empty()) {
    // Our own nodes only: with --nodes a SCAN of someone else's keyspace is not ours to run.
    // Each key counts once per node: a release succeeds at a quorum, so a node whose delete timed
    // out (a loaded machine) may keep its copy until the TTL ends it.
    st.stage = "counting keys left";
    st.keys_left = co_await count_keys(inspect, prefix);
  }
  st.stage = "closing";
}

}  // namespace

run_result run_renewal_scale(const run_context& context) {
  const auto& nodes = context.nodes;
  const int run = context.run;
  const renewal_sizes sizes = renewal_sizes_for(context.quick);
  renewal_state st;
  st.server_pids = context.server_pids;
  asio::io_context io(1);
  drive(io, renewal_work(nodes, sizes, key_prefix("renewal_scale", run), st),
        // Acquiring and releasing many leases takes time of its own: a second per thousand.
        hang_limit + sizes.hold + std::chrono::seconds(sizes.leases / 1'000),
        fmt::format("renewal_scale run {}", run), [&] {
          return fmt::format(
              "stage '{}', acquires started {}, acquired {}, released {}, lost {}, errors so far "
              "{}\n{}",
              st.stage, st.issued, st.acquired, st.released, st.lost, st.errors.total(),
              st.errors.summary());
        });
  if (st.watchers != 0) {
    st.errors.add("wait_lost never completed", {}, fmt::format("{} watchers", st.watchers));
  }
  run_result r;
  r.quorum = st.quorum;
  const auto acquired = static_cast<double>(st.acquired);
  const double seconds = st.hold_seconds;
  r.figures = {
      {"leases", acquired, 0},
      {"acquire_s", st.acquire_seconds, 2},
      {"release_s", st.release_seconds, 2},
      {"renewals", static_cast<double>(st.renewals), 0},
      {"renewals_per_s", seconds > 0 ? static_cast<double>(st.renewals) / seconds : 0, 1},
      {"scripts_per_node_s",
       seconds > 0 ? st.script_calls / static_cast<double>(nodes.size()) / seconds : 0, 1},
      {"client_cpu_pct", seconds > 0 ? 100 * st.cpu / seconds : 0, 2},
      {"rss_mb", st.rss_hold / (1024 * 1024), 1},
      {"per_lease_bytes", acquired > 0 ? (st.rss_hold - st.rss_before) / acquired : 0, 0},
      {"leases_lost", static_cast<double>(st.lost), 0},
      {"not_held_after_hold", static_cast<double>(st.not_held_at_end), 0},
  };
  if (!context.server_pids.empty()) {
    r.figures.push_back({"server_cpu_pct", seconds > 0 ? 100 * st.server_cpu / seconds : 0, 2});
    r.figures.push_back({"keys_left", static_cast<double>(st.keys_left), 0});
  }
  r.figures.push_back({"errors", static_cast<double>(st.errors.total()), 0});
  r.errors = std::move(st.errors);
  return r;
}

std::string renewal_scale_params(bool quick) {
  const renewal_sizes sizes = renewal_sizes_for(quick);
  // "ttl_ms" of the line is the other workloads' TTL; the leases here use their own.
  return fmt::format("\"leases_target\":{},\"lease_ttl_ms\":{},\"hold_s\":{},\"inflight\":{}",
                     sizes.leases, sizes.ttl.count(), sizes.hold.count(), sizes.inflight);
}

}  // namespace redlock::bench
