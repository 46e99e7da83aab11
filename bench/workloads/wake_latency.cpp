// Workload "wake_latency" of redlock_bench: how soon a waiter in another client gets a lock after
// its holder releases it. Per sample: client A holds a fresh key, client B starts waiting for it
// (with the library's default retry policy) and is left to fall asleep, then A releases; the
// sample is the time from the release's start to B's lease. Measured with release announcements
// (client_options::release_channel, the default) and without, alternating from run to run, next
// to the holder's release: one fan-out round trip under the same conditions, the unit the figure
// is judged in. Then a few long waits (the lock held for a second): the requests the waiter sends
// meanwhile, with announcements and without.

#include "bench_support.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redlock::bench {
namespace {

using namespace std::chrono_literals;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct wake_sizes {
  int samples;
  int reference;   // uncontended acquires
  int idle_waits;  // waits through a long hold
};

constexpr auto idle_hold = 1s;

wake_sizes wake_sizes_for(bool quick) {
  return quick ? wake_sizes{20, 50, 2} : wake_sizes{200, 500, 5};
}

struct wake_state {
  std::vector<double> wake_us;
  std::vector<double> acquire_us;
  std::vector<double> release_us;  // the holder's release: one fan-out after the same idle time
  std::vector<double> idle_wait_requests;  // over all nodes, per wait through idle_hold
  int done = 0;
  error_tally errors;
};

asio::awaitable<void> pause_for(clock_type::duration d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(use_tuple);
}

asio::awaitable<void> wake_work(const std::vector<redlock::node_config>& nodes, bool announce,
                                const std::string& prefix, const wake_sizes& sizes,
                                wake_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  auto options = bench_client_options;
  if (!announce) options.release_channel.clear();
  redlock::client holder(ex, nodes, options);
  redlock::client waiter(ex, nodes, options);
  co_await must_ping(holder);
  co_await must_ping(waiter);
  redlock::lock_options lock;
  lock.ttl = lock_ttl;

  for (int i = 0; i < sizes.reference; ++i) {
    const auto t0 = clock_type::now();
    auto [ec, lease] =
        co_await waiter.async_acquire(prefix + "ref" + std::to_string(i % 8), lock, use_tuple);
    const auto t1 = clock_type::now();
    if (ec) {
      st.errors.add("reference acquire", ec, lease.diagnostics());
      continue;
    }
    st.acquire_us.push_back(micros(t1 - t0));
    co_await lease.async_release(use_tuple);
  }

  for (int i = 0; i < sizes.samples; ++i) {
    const std::string key = prefix + "wake" + std::to_string(i);
    auto [ec, held] = co_await holder.async_acquire(key, lock, use_tuple);
    if (ec) {
      st.errors.add("holder acquire", ec, held.diagnostics());
      continue;
    }
    std::optional<clock_type::time_point> granted;
    redlock::lease got;
    auto wait_options = lock;
    wait_options.wait = 5s;
    waiter.async_acquire(key, wait_options, [&](redlock::error_code wait_ec, redlock::lease l) {
      if (wait_ec) st.errors.add("waiter acquire", wait_ec, l.diagnostics());
      got = std::move(l);
      granted = clock_type::now();
    });
    // Long enough for its first rounds, its subscription and a backoff or two.
    co_await pause_for(30ms);
    const auto released = clock_type::now();
    std::optional<clock_type::time_point> release_done;
    held.async_release([&](redlock::error_code release_ec) {
      if (release_ec) st.errors.add("holder release", release_ec, held.diagnostics());
      release_done = clock_type::now();
    });
    while (!granted || !release_done)
      co_await pause_for(50us);
    st.release_us.push_back(micros(*release_done - released));
    if (got.held()) {
      st.wake_us.push_back(micros(*granted - released));
      co_await got.async_release(use_tuple);
    }
    ++st.done;
  }

  // The nodes' count of lock requests, taken once the holder has the lock and again once the
  // waiter has it, less the holder's release (one request per node), is what the waiter sent: its
  // rounds, the one that acquired included.
  for (int i = 0; i < sizes.idle_waits; ++i) {
    const std::string key = prefix + "idle" + std::to_string(i);
    auto [ec, held] = co_await holder.async_acquire(key, lock, use_tuple);
    if (ec) {
      st.errors.add("holder acquire", ec, held.diagnostics());
      continue;
    }
    const double before = lock_requests_run(nodes);
    std::optional<clock_type::time_point> granted;
    redlock::lease got;
    auto wait_options = lock;
    wait_options.wait = idle_hold + 5s;
    waiter.async_acquire(key, wait_options, [&](redlock::error_code wait_ec, redlock::lease l) {
      if (wait_ec) st.errors.add("waiter acquire", wait_ec, l.diagnostics());
      got = std::move(l);
      granted = clock_type::now();
    });
    co_await pause_for(idle_hold);
    auto [release_ec] = co_await held.async_release(use_tuple);
    if (release_ec) st.errors.add("holder release", release_ec, held.diagnostics());
    while (!granted)
      co_await pause_for(50us);
    const double after = lock_requests_run(nodes);
    if (got.held()) {
      if (before > 0 && after > 0) {
        st.idle_wait_requests.push_back(after - before - static_cast<double>(nodes.size()));
      }
      co_await got.async_release(use_tuple);
    }
  }
}

}  // namespace

run_result run_wake_latency(const run_context& context) {
  const auto sizes = wake_sizes_for(context.quick);
  run_result r;
  wake_state on, off;
  const auto measure = [&](bool announce) {
    wake_state& st = announce ? on : off;
    const std::string name = announce ? "notify" : "no_notify";
    asio::io_context io(1);
    drive(io,
          wake_work(context.nodes, announce, key_prefix("wake-" + name, context.run), sizes, st),
          hang_limit + std::chrono::seconds(sizes.samples / 5) + sizes.idle_waits * idle_hold,
          "wake_latency " + name, [&] { return fmt::format("{} samples done", st.done); });
  };
  measure(context.run % 2 == 0);
  measure(context.run % 2 != 0);
  // The fan-out round trip the wake is judged against: the release that set it off, which meets
  // the same cold caches and sleeping servers after the idle 30 ms. The uncontended acquire in a
  // tight loop is shown beside it.
  const double round_trip = percentile(on.release_us, 0.5);
  const double wake_p50 = percentile(on.wake_us, 0.5);
  r.figures = {
      {"wake_p50_us", wake_p50, 1},
      {"wake_p99_us", percentile(on.wake_us, 0.99), 1},
      {"wake_p50_us_no_notify", percentile(off.wake_us, 0.5), 1},
      {"wake_p99_us_no_notify", percentile(off.wake_us, 0.99), 1},
      {"release_p50_us", round_trip, 1},
      {"wake_p50_vs_release", round_trip > 0 ? wake_p50 / round_trip : 0, 2},
      {"acquire_p50_us_hot", percentile(on.acquire_us, 0.5), 1},
      // Requests over all nodes from a waiter through a hold of idle_hold.
      {"idle_wait_requests", median(on.idle_wait_requests), 1},
      {"idle_wait_requests_no_notify", median(off.idle_wait_requests), 1},
      {"errors", static_cast<double>(on.errors.total() + off.errors.total()), 0},
  };
  r.quorum = context.nodes.size() / 2 + 1;
  return r;
}

std::string wake_latency_params(bool quick) {
  const auto sizes = wake_sizes_for(quick);
  return fmt::format(
      "\"samples\":{},\"reference_acquires\":{},\"asleep_ms\":30,\"idle_waits\":{},"
      "\"idle_hold_ms\":{}",
      sizes.samples, sizes.reference, sizes.idle_waits,
      std::chrono::duration_cast<std::chrono::milliseconds>(idle_hold).count());
}

}  // namespace redlock::bench
