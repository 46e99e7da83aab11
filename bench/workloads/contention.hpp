// What the contention workloads share: contenders that take one lock in turn and, under it, do a
// slow read-modify-write of a counter on a witness key (GET, hold 1 ms, SET value + 1). Any update
// lost shows a mutual-exclusion failure.
#ifndef REDLOCK_BENCH_WORKLOADS_CONTENTION_HPP
#define REDLOCK_BENCH_WORKLOADS_CONTENTION_HPP

#include "bench_support.hpp"
#include "redlock/client.hpp"
#include "redlock/options.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::bench {

// The contenders of one client; they all run on one executor.
struct contention_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::string key;
  std::string witness_key;
  redlock::lock_options options;  // a `wait` makes starved contenders give up and try again
  clock_type::time_point end{};
  std::size_t waiting = 0;  // contenders inside async_acquire
  std::uint64_t acquisitions = 0;
  std::vector<std::uint64_t> per_contender;  // acquisitions of each contender, if sized
  std::uint64_t gave_up = 0;                 // acquires that ended with wait_timeout
  std::int64_t final_counter = 0;
  double seconds = 0;
  std::vector<double> wait_us;  // from calling async_acquire to holding the lock
  error_tally errors;
};

// A witness reply as a counter (a missing key is not one).
std::optional<std::int64_t> to_integer(const redlock::resp::value& reply);

// Under the lock: GET `witness_key`, hold 1 ms (on `pause`), SET it to the value read + 1. A
// failure is counted in `errors`.
asio::awaitable<void> slow_increment(rd::connection& witness, const std::string& witness_key,
                                     asio::steady_timer& pause, error_tally& errors);

// How many coroutines contend in the contention workload and in those modelled on it.
inline constexpr std::size_t contention_contenders = 16;

// How long a phase of the contention workloads runs: 10 s, or 1 s with --quick.
inline clock_type::duration contention_phase(bool quick) {
  return quick ? clock_type::duration(std::chrono::seconds(1))
               : clock_type::duration(std::chrono::seconds(10));
}

// A figure of `r` by name; throws std::logic_error naming it when there is none.
double figure_of(const run_result& r, std::string_view name);

// A workload compared with the mutex in one run (semaphore, rw_lock): measure(i) for each of its
// `phases`, and the contention workload. The mutex goes first in even runs and last in odd ones
// (the phases then in reverse order), so that a host that speeds up or slows down over a run does
// not always favour the same side of the comparison. Returns the start of the comparison's
// result: the quorum, the mutex's figures acquisitions_per_s_mutex, wait_p50_us_mutex and
// wait_p99_us_mutex, and its errors; its lost updates are added to `lost_updates`.
run_result measure_beside_mutex(const run_context& context, std::size_t phases,
                                const std::function<void(std::size_t)>& measure,
                                double& lost_updates);

// Contender `index`: acquire, GET, hold 1 ms, SET + 1, release, until st.end.
asio::awaitable<void> contender(redlock::client& client, rd::connection& witness,
                                contention_state& st, std::size_t index);

}  // namespace redlock::bench

#endif
