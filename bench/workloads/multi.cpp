// Workload "multi" of redlock_bench: sets of locks (client::async_acquire_all) against the same
// resources taken as single locks one after another in sorted order (the order that keeps such
// code free of deadlock), in the same run.
// - Uncontended, sets of 1, 2 and 4 resources: latency (one caller, acquire then release) and
//   throughput (64 callers in flight, each on keys of its own, try-acquire then release).
// - Contended: 16 contenders over 32 resources, each taking a random set of 2 or 4 of them,
//   holding 1 ms: acquisitions per second and the wait from calling to holding. Inside the client
//   each resource's holders are counted: more than one at a time would be a mutual-exclusion
//   failure (figure most_holders_of_a_resource, 1 if right).
// Even runs measure the set first, odd runs the single locks first, so that a host that speeds up
// or slows down over a run does not always favour the same side.

#include "bench_support.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "workloads/contention.hpp"
#include "workloads/lock_measures.hpp"
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
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace redlock::bench {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t uncontended_sizes[] = {1, 2, 4};
constexpr std::size_t contended_sizes[] = {2, 4};
constexpr std::size_t throughput_inflight = 64;
constexpr std::size_t contended_resources = 32;

// How a piece of work takes its resources: one set, or single locks in sorted order.
enum class shape { set, singles };

std::string_view shape_name(shape s) {
  return s == shape::set ? "set" : "seq";
}

// What one phase of the workload saw.
struct multi_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::uint64_t done = 0;  // acquisitions of a whole set
  std::vector<double> acquire_us, release_us, wait_us;
  double seconds = 0;
  std::vector<std::size_t> holders;  // per contended resource, held right now
  std::size_t most_holders = 0;
  error_tally errors;
};

// The leases that hold `resources` (sorted) after one acquire of the given shape; empty with the
// failure counted in st.errors. The singles' partial holds are released on a failure.
asio::awaitable<std::vector<redlock::lease>> take(redlock::client& client, shape how,
                                                  const std::vector<std::string>& resources,
                                                  const redlock::lock_options& options, bool wait,
                                                  multi_state& st) {
  std::vector<redlock::lease> held;
  if (how == shape::set) {
    error_code ec;
    redlock::lease lease;
    if (wait) {
      std::tie(ec, lease) = co_await client.async_acquire_all(resources, options,
                                                              asio::as_tuple(asio::use_awaitable));
    } else {
      std::tie(ec, lease) = co_await client.async_try_acquire_all(
          resources, options, asio::as_tuple(asio::use_awaitable));
    }
    if (ec) {
      st.errors.add("set acquire", ec, lease.diagnostics());
    } else {
      held.push_back(std::move(lease));
    }
    co_return held;
  }
  for (const auto& resource : resources) {
    error_code ec;
    redlock::lease lease;
    if (wait) {
      std::tie(ec, lease) =
          co_await client.async_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
    } else {
      std::tie(ec, lease) =
          co_await client.async_try_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
    }
    if (ec) {
      st.errors.add("single acquire", ec, lease.diagnostics());
      for (auto& taken : held)
        co_await taken.async_release(asio::as_tuple(asio::use_awaitable));
      held.clear();
      co_return held;
    }
    held.push_back(std::move(lease));
  }
  co_return held;
}

// Releases one after another, as the code that took them one after another would.
asio::awaitable<void> give_back(std::vector<redlock::lease>& held, multi_state& st) {
  for (auto& lease : held) {
    auto [ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (ec) st.errors.add("release", ec, lease.diagnostics());
  }
}

std::vector<std::string> names(const std::string& prefix, std::size_t count) {
  std::vector<std::string> all;
  for (std::size_t i = 0; i < count; ++i)
    all.push_back(fmt::format("{}{}", prefix, i));
  std::sort(all.begin(), all.end());
  return all;
}

redlock::lock_options lock_for_bench() {
  redlock::lock_options options;
  options.ttl = lock_ttl;  // no wait limit, as contention's
  return options;
}

// `callers` coroutines, make(client, index, end), on one client of their own, which they share;
// `end` is `duration` after they start, and st.seconds how long they took.
template <class MakeCaller>
asio::awaitable<void> callers_work(const std::vector<redlock::node_config>& nodes,
                                   std::size_t callers, clock_type::duration duration,
                                   multi_state& st, MakeCaller make) {
  const auto ex = co_await asio::this_coro::executor;
  redlock::client client(ex, nodes, bench_client_options);
  st.quorum = client.quorum();
  st.stage = "ping";
  co_await must_ping(client);
  st.stage = "running";
  const auto t0 = clock_type::now();
  const auto end = t0 + duration;
  co_await redlock::test::run_all(callers,
                                  [&](std::size_t index) { return make(client, index, end); });
  st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  st.stage = "destroying the client";
}

// One caller: acquire `resources`, release them, `sizes` times.
asio::awaitable<void> latency_work(const std::vector<redlock::node_config>& nodes, shape how,
                                   std::vector<std::string> resources, latency_sizes sizes,
                                   multi_state& st) {
  co_await callers_work(
      nodes, 1, {}, st,
      [&](redlock::client& client, std::size_t, clock_type::time_point) -> asio::awaitable<void> {
        const auto options = lock_for_bench();
        for (int i = 0; i < sizes.warmup + sizes.iterations; ++i) {
          const auto t0 = clock_type::now();
          auto held = co_await take(client, how, resources, options, true, st);
          const auto t1 = clock_type::now();
          if (held.empty()) continue;
          co_await give_back(held, st);
          const auto t2 = clock_type::now();
          if (i < sizes.warmup) continue;
          st.acquire_us.push_back(micros(t1 - t0));
          st.release_us.push_back(micros(t2 - t1));
        }
      });
}

// throughput_inflight callers, each on keys of its own, try-acquire then release until the end.
asio::awaitable<void> throughput_work(const std::vector<redlock::node_config>& nodes, shape how,
                                      std::string prefix, std::size_t size,
                                      clock_type::duration duration, multi_state& st) {
  co_await callers_work(nodes, throughput_inflight, duration, st,
                        [&](redlock::client& client, std::size_t caller,
                            clock_type::time_point end) -> asio::awaitable<void> {
                          const auto options = lock_for_bench();
                          const auto resources = names(fmt::format("{}c{}-", prefix, caller), size);
                          while (clock_type::now() < end) {
                            auto held = co_await take(client, how, resources, options, false, st);
                            if (held.empty()) continue;
                            co_await give_back(held, st);
                            ++st.done;
                          }
                        });
}

// `contention_contenders` callers over contended_resources resources, each taking random sets of
// `size`, holding each 1 ms; the holders of each resource are counted meanwhile.
asio::awaitable<void> contention_work(const std::vector<redlock::node_config>& nodes, shape how,
                                      std::string prefix, std::size_t size,
                                      clock_type::duration duration, multi_state& st) {
  const auto all = names(prefix, contended_resources);
  st.holders.assign(all.size(), 0);
  co_await callers_work(nodes, contention_contenders, duration, st,
                        [&](redlock::client& client, std::size_t index,
                            clock_type::time_point end) -> asio::awaitable<void> {
                          const auto options = lock_for_bench();
                          asio::steady_timer pause(client.get_executor());
                          std::minstd_rand random(static_cast<unsigned>(index + 1));
                          std::vector<std::size_t> shuffled(all.size());
                          std::iota(shuffled.begin(), shuffled.end(), std::size_t{0});
                          while (clock_type::now() < end) {
                            std::shuffle(shuffled.begin(), shuffled.end(), random);
                            std::vector<std::size_t> chosen(shuffled.begin(),
                                                            shuffled.begin() + size);
                            std::sort(chosen.begin(), chosen.end());
                            std::vector<std::string> resources;
                            for (const auto i : chosen)
                              resources.push_back(all[i]);
                            const auto asked = clock_type::now();
                            auto held = co_await take(client, how, resources, options, true, st);
                            if (!held.empty()) {
                              st.wait_us.push_back(micros(clock_type::now() - asked));
                              ++st.done;
                              for (const auto i : chosen)
                                st.most_holders = std::max(st.most_holders, ++st.holders[i]);
                            }
                            pause.expires_after(1ms);
                            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                            if (held.empty()) continue;
                            for (const auto i : chosen)
                              --st.holders[i];
                            co_await give_back(held, st);
                          }
                        });
}

std::string describe(const multi_state& st) {
  return fmt::format("stage '{}', done {}, errors so far {}\n{}", st.stage, st.done,
                     st.errors.total(), st.errors.summary());
}

// One phase on an io_context of its own under the watchdog.
template <class Work>
multi_state measure(std::string_view what, clock_type::duration expected, Work work) {
  multi_state st;
  asio::io_context io(1);
  drive(io, work(st), hang_limit + expected, what, [&] { return describe(st); });
  return st;
}

}  // namespace

run_result run_multi(const run_context& context) {
  const auto& nodes = context.nodes;
  const std::string prefix = key_prefix("multi", context.run);
  const latency_sizes sizes = context.quick ? latency_sizes{20, 200} : latency_sizes{100, 1000};
  const clock_type::duration throughput_time = context.quick ? 500ms : 3s;
  const clock_type::duration contention_time = context.quick ? 1s : 5s;
  // Even runs: the set first; odd runs: the singles first.
  const shape order[2] = {context.run % 2 == 0 ? shape::set : shape::singles,
                          context.run % 2 == 0 ? shape::singles : shape::set};
  run_result r;
  const auto tally = [&](multi_state& st, std::string_view phase) {
    r.quorum = st.quorum;
    r.errors.merge(st.errors, fmt::format("{} ", phase));
  };
  // Every size and shape of one phase: measured, its figures recorded by record(tag, state).
  const auto run_phase = [&](std::span<const std::size_t> set_sizes, std::string_view phase,
                             clock_type::duration expected, const auto& work, const auto& record) {
    for (const auto size : set_sizes) {
      for (const shape how : order) {
        const auto tag = fmt::format("{}_{}", shape_name(how), size);
        const auto keys = fmt::format("{}{}-{}-", prefix, phase, tag);
        auto st = measure(fmt::format("multi {} {} run {}", phase, tag, context.run), expected,
                          [&](multi_state& s) { return work(how, keys, size, s); });
        record(tag, st);
        tally(st, fmt::format("{} {}", phase, tag));
      }
    }
  };
  run_phase(
      uncontended_sizes, "latency", 0s,
      [&](shape how, const std::string& keys, std::size_t size, multi_state& s) {
        return latency_work(nodes, how, names(keys, size), sizes, s);
      },
      [&](const std::string& tag, const multi_state& st) {
        r.figures.push_back({"acquire_p50_us_" + tag, percentile(st.acquire_us, 0.50), 1});
        r.figures.push_back({"acquire_p99_us_" + tag, percentile(st.acquire_us, 0.99), 1});
        r.figures.push_back({"release_p50_us_" + tag, percentile(st.release_us, 0.50), 1});
      });
  const auto rate = [](const multi_state& st) {
    return st.seconds > 0 ? static_cast<double>(st.done) / st.seconds : 0;
  };
  run_phase(
      uncontended_sizes, "throughput", throughput_time,
      [&](shape how, const std::string& keys, std::size_t size, multi_state& s) {
        return throughput_work(nodes, how, keys, size, throughput_time, s);
      },
      [&](const std::string& tag, const multi_state& st) {
        r.figures.push_back({"sets_per_s_" + tag, rate(st), 1});
      });
  std::size_t most_holders = 0;
  run_phase(
      contended_sizes, "contention", contention_time,
      [&](shape how, const std::string& keys, std::size_t size, multi_state& s) {
        return contention_work(nodes, how, keys, size, contention_time, s);
      },
      [&](const std::string& tag, const multi_state& st) {
        r.figures.push_back({"contended_sets_per_s_" + tag, rate(st), 1});
        r.figures.push_back({"contended_wait_p50_us_" + tag, percentile(st.wait_us, 0.50), 1});
        r.figures.push_back({"contended_wait_p99_us_" + tag, percentile(st.wait_us, 0.99), 1});
        most_holders = std::max(most_holders, st.most_holders);
      });
  r.figures.push_back({"most_holders_of_a_resource", static_cast<double>(most_holders), 0});
  r.figures.push_back({"errors", static_cast<double>(r.errors.total()), 0});
  return r;
}

std::string multi_params(bool quick) {
  return fmt::format(
      "\"set_sizes\":[1,2,4],\"latency_iterations\":{},\"throughput_inflight\":{},"
      "\"throughput_s\":{},\"contenders\":{},\"contended_resources\":{},"
      "\"contended_set_sizes\":[2,4],\"contention_s\":{},\"hold_ms\":1",
      quick ? 200 : 1000, throughput_inflight, quick ? 0.5 : 3.0, contention_contenders,
      contended_resources, quick ? 1 : 5);
}

}  // namespace redlock::bench
