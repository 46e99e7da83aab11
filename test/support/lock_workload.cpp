#include "support/lock_workload.hpp"

#include "net/connection.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>

namespace redlock::test {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr detail::request_options witness_timeout{std::chrono::milliseconds(2000), nullptr};

std::int64_t to_integer(const resp::value& reply) {
  if (reply.is_null()) return 0;
  std::int64_t value = 0;
  if (reply.kind == resp::type::integer) return reply.integer;
  const auto& t = reply.text;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || end != t.data() + t.size()) {
    throw std::runtime_error(fmt::format("witness: not a number: {}", to_debug_string(reply)));
  }
  return value;
}

// The witness is judged, not tested: if it fails the run means nothing, so failures throw.
// (A std::array, not a braced list: g++ 12 cannot keep the latter's array across a co_await.)
template <std::size_t N>
asio::awaitable<resp::value> witness_exec(detail::connection& witness,
                                          std::array<std::string_view, N> command) {
  auto [ec, reply] = co_await witness.async_exec(std::span<const std::string_view>(command),
                                                 witness_timeout, tuple_awaitable);
  if (ec || reply.is_error()) {
    throw std::runtime_error(
        fmt::format("witness {}: {} {}", command.front(), ec.message(), reply.text));
  }
  co_return std::move(reply);
}

template <class... Words>
std::array<std::string_view, sizeof...(Words)> words(const Words&... w) {
  return {std::string_view(w)...};
}

// What the contenders of one run share; they all run on one executor.
struct shared_run {
  shared_run(workload_options o, history& h) : options(std::move(o)), log(h) {}

  workload_options options;
  history& log;
  workload_stats stats;
  std::shared_ptr<detail::connection> witness;
  std::chrono::steady_clock::time_point end{};
};

event make_event(const shared_run& run, const std::string& who, const std::string& token,
                 op_kind kind, op_result result, mono_ns invoke) {
  return {who, run.options.resource, token, kind, result, invoke, mono_now(), 0, 0};
}

asio::awaitable<void> contender(client& locks, shared_run& run, std::size_t index) {
  const std::string who = fmt::format("{}/c{}", run.options.process, index);
  std::minstd_rand random(static_cast<unsigned>(std::random_device{}()));
  std::uniform_int_distribution<long long> hold_ms(run.options.hold_min.count(),
                                                   run.options.hold_max.count());
  auto& stats = run.stats;
  auto& witness = *run.witness;
  while (std::chrono::steady_clock::now() < run.end) {
    ++stats.attempts;
    const mono_ns invoke = mono_now();
    auto [ec, lease] =
        co_await locks.async_acquire(run.options.resource, run.options.lock, tuple_awaitable);
    event acquired = make_event(run, who, lease.token(), op_kind::acquire, op_result::ok, invoke);
    acquired.ttl =
        std::chrono::duration_cast<std::chrono::nanoseconds>(run.options.lock.ttl).count();
    if (ec) {
      // async_acquire cleans up a round it gives up on, so a failed acquire never took effect;
      // only an abort (client shut down mid-round) leaves the outcome open.
      acquired.result =
          ec == asio::error::operation_aborted ? op_result::unknown : op_result::failed;
      run.log.record(acquired);
      ++stats.failures[fmt::format("acquire: {}", ec.message())];
      co_await sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    acquired.valid_until = to_mono_ns(lease.valid_until());
    run.log.record(acquired);
    ++stats.acquisitions;
    stats.acquired_at.push_back(acquired.complete);

    const std::int64_t occupancy =
        to_integer(co_await witness_exec(witness, words("INCR", run.options.occupancy_key)));
    stats.max_occupancy = std::max(stats.max_occupancy, occupancy);
    const std::int64_t counter =
        to_integer(co_await witness_exec(witness, words("GET", run.options.counter_key)));
    co_await sleep_for(std::chrono::milliseconds(hold_ms(random)));
    if (lease.held()) {
      const std::string next = std::to_string(counter + 1);
      co_await witness_exec(witness, words("SET", run.options.counter_key, next));
      ++stats.increments;
    } else {
      // A correct holder checks before it writes; the loss ends its hold in the history.
      ++stats.lost_before_write;
      run.log.record(make_event(run, who, lease.token(), op_kind::lost, op_result::ok, mono_now()));
    }
    co_await witness_exec(witness, words("DECR", run.options.occupancy_key));

    const mono_ns release_invoke = mono_now();
    const std::string token = lease.token();
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    run.log.record(make_event(run, who, token, op_kind::release,
                              release_ec ? op_result::failed : op_result::ok, release_invoke));
    if (release_ec) ++stats.failures[fmt::format("release: {}", release_ec.message())];
  }
}

}  // namespace

void workload_stats::merge(const workload_stats& other) {
  attempts += other.attempts;
  acquisitions += other.acquisitions;
  increments += other.increments;
  lost_before_write += other.lost_before_write;
  max_occupancy = std::max(max_occupancy, other.max_occupancy);
  for (const auto& [what, count] : other.failures)
    failures[what] += count;
  acquired_at.insert(acquired_at.end(), other.acquired_at.begin(), other.acquired_at.end());
  std::sort(acquired_at.begin(), acquired_at.end());
}

asio::awaitable<void> run_lock_workload(client& locks, workload_options options, history& log,
                                        workload_stats& stats) {
  const auto executor = co_await asio::this_coro::executor;
  shared_run run(std::move(options), log);
  run.witness = detail::connection::create(executor, run.options.witness);
  run.end = std::chrono::steady_clock::now() + run.options.duration;
  co_await run_all(run.options.contenders, [&](std::size_t i) { return contender(locks, run, i); });
  run.witness->close();
  stats = std::move(run.stats);
}

}  // namespace redlock::test
